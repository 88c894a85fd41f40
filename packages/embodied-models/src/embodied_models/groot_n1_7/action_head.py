"""GR00T N1.7's action head: embodiment tables, state/action encoders, the DiT and the flow-matching objective.

Port of the computation of lerobot 0.6.1 ``GR00TN17ActionHead`` (``policies/groot/groot_n1_7.py``), which follows
Isaac-GR00T's ``gr00t_n1d7``. The layers, the flow terms and the sampler are shared with N1.6
(``embodied_models.groot``: layers.py, head.py, dit.py); N1.7 adds the VL self-attention over the backbone features
and zeroes the state token on state dropout. Names importable from here before that split stay importable.

Shape legend: B batch, H action tokens (model.action_horizon), A max_action_dim, S max_state_dim, L backbone
tokens, D token width (input_embedding_dim), C backbone width.
"""

from __future__ import annotations

import torch
from torch import nn

from embodied_models.groot.dit import SelfAttentionStack
from embodied_models.groot.head import ActionHeadInputs, FlowMatchingHead
from embodied_models.groot.layers import (
    CategorySpecificLinear,
    CategorySpecificMLP,
    MultiEmbodimentActionEncoder,
    masked_flow_loss,
    time_features,
)
from embodied_models.groot_n1_7.config import GrootModelConfig

__all__ = ["ActionHeadInputs", "CategorySpecificLinear", "CategorySpecificMLP", "GrootActionHead",
           "MultiEmbodimentActionEncoder", "masked_flow_loss", "time_features"]


class GrootActionHead(FlowMatchingHead, nn.Module):
    """The flow-matching action head (parameter names as in GR00T / lerobot checkpoints under ``action_head.``)."""

    def __init__(self, config: GrootModelConfig) -> None:
        super().__init__()
        self.config = config
        self.build_modules(config, vl_self_attention=lambda: SelfAttentionStack(
            num_layers=config.vl_num_layers, num_heads=config.vl_num_heads, head_dim=config.vl_head_dim,
            dropout=config.dropout))

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute DiT and VL self-attention blocks in backward."""
        self.model.gradient_checkpointing = enabled
        self.vl_self_attention.gradient_checkpointing = enabled

    def encode_context(self, features: torch.Tensor) -> torch.Tensor:
        """``vl_self_attention(vlln(features))``: what the DiT cross-attends to."""
        return self.vl_self_attention(self.vlln(features))
