"""GR00T N1.6 as an embodied model plugin: Eagle3 backbone features -> flow-matching action head.

``forward(batch)``: the Eagle3 backbone (SigLIP2 + projector + Qwen3 cut to ``select_layer`` layers, frozen but for
the top ``tune_top_llm_layers`` language layers by default) encodes the views and the prompt; the action head draws
noise and flow time from the model's own generator (``embodied_models.groot.draws``) and returns
``sum(MSE * action_mask) / (sum(action_mask) + 1e-6)``. ``sample_actions``: 4 Euler steps from noise at t = 0.
See README.md for the sources and what differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_models.groot.dit import GrootBlock
from embodied_models.groot.draws import DrawStream, FlowDraws
from embodied_models.groot.head import ActionHeadInputs
from embodied_models.groot_n1_6.action_head import GrootN16ActionHead
from embodied_models.groot_n1_6.backbone import EagleBackbone
from embodied_models.groot_n1_6.batch import GrootN16Batch
from embodied_models.groot_n1_6.checks import size_problems
from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig
from embodied_models.groot_n1_6.siglip2 import Siglip2EncoderLayer

__all__ = ["GrootN16Model", "build_model"]

_LLM_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                    "mlp.up_proj", "mlp.down_proj")
_VISION_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj", "mlp.fc1",
                       "mlp.fc2")
_DIT_LORA = ("action_head.model.transformer_blocks.*.attn1.to_q", "action_head.model.transformer_blocks.*.attn1.to_k",
             "action_head.model.transformer_blocks.*.attn1.to_v",
             "action_head.model.transformer_blocks.*.attn1.to_out.0",
             "action_head.model.transformer_blocks.*.ff.net.0.proj", "action_head.model.transformer_blocks.*.ff.net.2")


class GrootN16Model(EmbodiedModel):
    """The GR00T N1.6 network (``backbone.*`` + ``action_head.*``).

    Args:
        config: network sizes, trainability switches and flow constants.
        data_config: the real action width and the data horizon (checked against the model's limits).
    """

    def __init__(self, config: GrootN16ModelConfig, data_config: GrootN16DataConfig) -> None:
        super().__init__()
        problems = size_problems(config, data_config) + config.validate()
        if problems:
            raise ValueError("GR00T N1.6 sizes: " + "; ".join(problems))
        self.config = config
        self.backbone = EagleBackbone(config)
        self.action_head = GrootN16ActionHead(config)
        self.backbone.gradient_checkpointing = config.gradient_checkpointing
        self.backbone.vision.gradient_checkpointing = config.gradient_checkpointing
        self.action_head.set_gradient_checkpointing(config.gradient_checkpointing)
        self.draws = DrawStream()

    # ------------------------------------------------------------------ RNG the trainer manages
    def seed_rng(self, seed: int, *, rank: int = 0) -> None:
        """Seeds the generator every training draw goes through (the same ``seed`` on every rank)."""
        self.draws.seed(seed, rank=rank)

    def rng_state(self) -> torch.Tensor:
        """The generator state (a uint8 tensor)."""
        return self.draws.state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        """Restores :meth:`rng_state`."""
        self.draws.set_state(state)

    # ------------------------------------------------------------------ protocol members
    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """DiT blocks, language decoder layers and vision encoder layers."""
        return (GrootBlock, Qwen3DecoderLayer, Siglip2EncoderLayer)

    def no_weight_decay(self) -> frozenset[str]:
        """The embodiment tables' biases (``.b``, 2-D, so not caught by the bias rule) and the action positions."""
        return frozenset(name for name, p in self.named_parameters()
                         if p.requires_grad and (name.endswith(".b") or "position_embedding" in name))

    def default_lora_targets(self) -> tuple[str, ...]:
        """The DiT's attention and FFN projections, plus the attention and MLP projections of every backbone layer
        that trains (all language layers with ``model.tune_llm``, else the top ``model.tune_top_llm_layers``; the
        vision layers with ``model.tune_visual``). See README.md."""
        cfg = self.config
        first = 0 if cfg.tune_llm else cfg.select_layer - cfg.tune_top_llm_layers
        llm = tuple(f"backbone.layers.{i}.{name}" for i in range(first, cfg.select_layer) for name in _LLM_PROJECTIONS)
        vision = tuple(f"backbone.vision.encoder.layers.*.{name}" for name in _VISION_PROJECTIONS) \
            if cfg.tune_visual else ()
        return (*_DIT_LORA, *llm, *vision)

    def load_pretrained_checkpoint(self, path: str | Path, **allow: Any) -> Any:
        """Loads an official GR00T N1.6 / LoongForge / own-layout checkpoint through the declared key map (strict).

        ``allow`` takes checkpoint.load_groot_n1_6_checkpoint's allow_missing / allow_unexpected / allow_mismatched.
        """
        from embodied_models.groot_n1_6.checkpoint import load_groot_n1_6_checkpoint

        return load_groot_n1_6_checkpoint(self, path, **allow)

    @torch.no_grad()
    def init_non_persistent_buffers(self) -> None:
        """Recomputes buffers that are not in the state dict (after building on the meta device + to_empty)."""
        self.backbone.init_non_persistent_buffers()

    # ------------------------------------------------------------------ forward
    def head_inputs(self, batch: GrootN16Batch) -> ActionHeadInputs:
        """Backbone features and the head's other inputs."""
        features = self.backbone(batch.images, batch.input_ids, batch.attention_mask, batch.image_mask)
        return ActionHeadInputs(features=features, attention_mask=batch.attention_mask, image_mask=batch.image_mask,
                                state=batch.state.to(features.dtype), embodiment_id=batch.embodiment_id)

    def pixel_head_inputs(self, pixel_values: Sequence[torch.Tensor], input_ids: torch.Tensor,
                          attention_mask: torch.Tensor, image_mask: torch.Tensor, state: torch.Tensor,
                          embodiment_id: torch.Tensor) -> ActionHeadInputs:
        """The head's inputs from already normalized images of any sizes (LoongForge's ``pixel_values`` list: flat
        over the batch, element order then image order)."""
        features = self.backbone.forward_pixels(pixel_values, input_ids, attention_mask, image_mask)
        return ActionHeadInputs(features=features, attention_mask=attention_mask, image_mask=image_mask,
                                state=state.to(features.dtype), embodiment_id=embodiment_id)

    def draw(self, batch: GrootN16Batch) -> FlowDraws:
        """This forward's noise and time draws (N1.6 has no state dropout)."""
        cfg = self.config
        return self.draws.draw(batch.sample_index, batch.batch_size, (cfg.action_horizon, cfg.max_action_dim),
                               alpha=cfg.noise_beta_alpha, beta=cfg.noise_beta_beta, noise_s=cfg.noise_s,
                               state_dropout_prob=0.0)

    def training_terms(self, batch: GrootN16Batch, draws: FlowDraws | None = None) -> dict[str, torch.Tensor]:
        """Loss and intermediates (see FlowMatchingHead.training_terms); draws from the generator unless given."""
        if batch.actions is None or batch.action_mask is None:
            raise ValueError("the batch has no actions; training needs them (inference: sample_actions)")
        draws = (draws if draws is not None else self.draw(batch)).to(batch.actions.device)
        inputs = self.head_inputs(batch)
        actions = batch.actions.to(inputs.features.dtype)
        return self.action_head.training_terms(inputs, actions, batch.action_mask,
                                               noise=draws.noise.to(actions.dtype), t=draws.t)

    def forward(self, batch: GrootN16Batch) -> ModelOutput:
        """Training loss ``sum(MSE * action_mask) / (sum(action_mask) + 1e-6)`` (no host sync)."""
        return ModelOutput(loss=self.training_terms(batch)["loss"], metrics={})

    @torch.no_grad()
    def sample_actions(self, batch: GrootN16Batch, noise: torch.Tensor | None = None,
                       num_steps: int | None = None) -> torch.Tensor:
        """Normalized actions [B, model.action_horizon, model.max_action_dim] (``noise`` from torch's RNG unless
        given); the transforms' postprocess_actions keeps the data horizon and dims and unnormalizes."""
        cfg = self.config
        inputs = self.head_inputs(batch)
        if noise is None:
            noise = torch.randn(batch.batch_size, cfg.action_horizon, cfg.max_action_dim, device=batch.state.device)
        x = self.action_head.sample(inputs, noise.to(inputs.features.dtype), num_steps or cfg.num_inference_steps)
        return x.float()


def build_model(model_config: GrootN16ModelConfig, data_config: GrootN16DataConfig) -> GrootN16Model:
    """Model factory of the ``groot_n1_6`` / ``groot_n1_6_tiny`` plugins (random init; see checkpoint.py to load)."""
    return GrootN16Model(model_config, data_config)
