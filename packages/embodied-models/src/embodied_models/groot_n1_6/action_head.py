"""GR00T N1.6's action head: ``vlln`` over the backbone features, the category-specific state encoder, the
multi-embodiment action encoder, the AlternateVL DiT and the category-specific decoder.

Port of the computation of LoongForge ``Gr00tN1d6ActionHead`` (``groot_n1_6/modeling_groot_n1_6.py`` at
``c6275661``) and its sampling loop (``GrootN1d6Policy._sample_normalized_actions``). The layers, the flow terms
and the Euler sampler are the ones N1.7 uses (``embodied_models.groot``); what N1.6 does differently is here: the
DiT cross-attends to ``vlln(features)`` directly (no VL self-attention), and there is no state dropout (0.0 in
N1.6; see config.py). Parameter names are the checkpoint's (``action_head.*``).

Shape legend: B batch, H action tokens (model.action_horizon), A max_action_dim, S max_state_dim, L backbone
tokens, D token width (input_embedding_dim), C backbone width.
"""

from __future__ import annotations

import torch
from torch import nn

from embodied_models.groot.head import FlowMatchingHead
from embodied_models.groot_n1_6.config import GrootN16ModelConfig

__all__ = ["GrootN16ActionHead"]


class GrootN16ActionHead(FlowMatchingHead, nn.Module):
    """The flow-matching action head; the modules are built in LoongForge's order (model, state_encoder,
    action_encoder, action_decoder, vlln, position_embedding)."""

    def __init__(self, config: GrootN16ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.build_modules(config)
        self.set_trainable(tune_projector=config.tune_projector, tune_diffusion_model=config.tune_diffusion_model,
                           tune_vlln=config.tune_vlln)

    def set_trainable(self, *, tune_projector: bool, tune_diffusion_model: bool, tune_vlln: bool) -> None:
        """LoongForge's switches: the encoders, decoder and positions (projector), the DiT, and vlln."""
        self.tune_projector, self.tune_diffusion_model = tune_projector, tune_diffusion_model
        for module in (self.state_encoder, self.action_encoder, self.action_decoder, self.position_embedding):
            module.requires_grad_(tune_projector)
        self.model.requires_grad_(tune_diffusion_model)
        self.vlln.requires_grad_(tune_vlln)

    def train(self, mode: bool = True) -> GrootN16ActionHead:
        """Frozen parts stay in eval mode while training (LoongForge's set_frozen_modules_to_eval_mode)."""
        super().train(mode)
        if mode:
            if not self.tune_projector:
                for module in (self.state_encoder, self.action_encoder, self.action_decoder, self.position_embedding):
                    module.eval()
            if not self.tune_diffusion_model:
                self.model.eval()
        return self

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute the DiT blocks in backward."""
        self.model.gradient_checkpointing = enabled

    def encode_context(self, features: torch.Tensor) -> torch.Tensor:
        """``vlln(features)``: what the DiT cross-attends to."""
        return self.vlln(features)
