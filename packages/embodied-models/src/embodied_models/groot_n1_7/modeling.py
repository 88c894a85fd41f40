"""GR00T N1.7 as an embodied model plugin: backbone features -> flow-matching action head.

``forward(batch)``: the Qwen3-VL backbone (first ``select_layer`` layers, frozen by default) encodes the views and
the prompt; the action head draws noise, flow time and state dropout from the model's own generator (see draws.py)
and returns ``sum(MSE * action_mask) / sum(action_mask)``. ``sample_actions``: 4 Euler steps from noise at t = 0.
See README.md for the sources and what differs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextDecoderLayer, Qwen3VLVisionBlock

from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_models.groot.dit import GrootBlock
from embodied_models.groot.draws import DrawStream, FlowDraws
from embodied_models.groot.head import ActionHeadInputs
from embodied_models.groot_n1_7.action_head import GrootActionHead
from embodied_models.groot_n1_7.backbone import GrootBackbone
from embodied_models.groot_n1_7.batch import GrootBatch
from embodied_models.groot_n1_7.checks import size_problems
from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig

__all__ = ["GrootN17Model", "build_model"]

_BACKBONE_LORA = ("backbone.layers.*.self_attn.q_proj", "backbone.layers.*.self_attn.k_proj",
                  "backbone.layers.*.self_attn.v_proj", "backbone.layers.*.self_attn.o_proj",
                  "backbone.layers.*.mlp.gate_proj", "backbone.layers.*.mlp.up_proj",
                  "backbone.layers.*.mlp.down_proj")
_DIT_LORA = ("action_head.model.transformer_blocks.*.attn1.to_q", "action_head.model.transformer_blocks.*.attn1.to_k",
             "action_head.model.transformer_blocks.*.attn1.to_v",
             "action_head.model.transformer_blocks.*.attn1.to_out.0",
             "action_head.model.transformer_blocks.*.ff.net.0.proj", "action_head.model.transformer_blocks.*.ff.net.2")


class GrootN17Model(EmbodiedModel):
    """The GR00T N1.7 network (``backbone.*`` + ``action_head.*``).

    Args:
        config: network sizes and flow constants.
        data_config: the real action width and the data horizon (checked against the model's limits).
    """

    def __init__(self, config: GrootModelConfig, data_config: GrootDataConfig) -> None:
        super().__init__()
        problems = size_problems(config, data_config) + config.validate()
        if problems:
            raise ValueError("GR00T N1.7 sizes: " + "; ".join(problems))
        self.config = config
        self.backbone = GrootBackbone(config)
        self.action_head = GrootActionHead(config)
        self.backbone.gradient_checkpointing = config.gradient_checkpointing
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
        """DiT and VL self-attention blocks, backbone decoder layers and vision blocks."""
        return (GrootBlock, Qwen3VLTextDecoderLayer, Qwen3VLVisionBlock)

    def no_weight_decay(self) -> frozenset[str]:
        """The embodiment tables' biases (``.b``, 2-D, so not caught by the bias rule) and the action positions."""
        return frozenset(name for name, p in self.named_parameters()
                         if p.requires_grad and (name.endswith(".b") or "position_embedding" in name))

    def default_lora_targets(self) -> tuple[str, ...]:
        """The DiT's attention and FFN projections; with ``model.tune_llm`` also the backbone layers' attention and
        MLP projections (a frozen backbone gets no adapters). See README.md."""
        return (*_DIT_LORA, *(_BACKBONE_LORA if self.config.tune_llm else ()))

    def load_pretrained_checkpoint(self, path: str | Path, **allow: Any) -> Any:
        """Loads an official GR00T N1.7 / lerobot / own-layout checkpoint through the declared key map (strict).

        ``allow`` takes checkpoint.load_groot_checkpoint's allow_missing / allow_unexpected / allow_mismatched.
        """
        from embodied_models.groot_n1_7.checkpoint import load_groot_checkpoint

        return load_groot_checkpoint(self, path, **allow)

    @torch.no_grad()
    def init_non_persistent_buffers(self) -> None:
        """Recomputes buffers that are not in the state dict (after building on the meta device + to_empty)."""
        self.backbone.init_non_persistent_buffers()

    def train(self, mode: bool = True) -> GrootN17Model:
        """Training mode; the frozen backbone parts stay in eval mode."""
        super().train(mode)
        self.backbone.train(mode)
        return self

    # ------------------------------------------------------------------ forward
    def head_inputs(self, batch: GrootBatch) -> ActionHeadInputs:
        """Backbone features and the head's other inputs."""
        features = self.backbone(batch.images, batch.input_ids, batch.attention_mask, batch.image_mask,
                                 batch.position_ids)
        return ActionHeadInputs(features=features, attention_mask=batch.attention_mask, image_mask=batch.image_mask,
                                state=batch.state.to(features.dtype), embodiment_id=batch.embodiment_id)

    def draw(self, batch: GrootBatch) -> FlowDraws:
        """This forward's noise, time and state-dropout draws (state dropout only in training mode)."""
        cfg = self.config
        return self.draws.draw(batch.sample_index, batch.batch_size, (cfg.action_horizon, cfg.max_action_dim),
                               alpha=cfg.noise_beta_alpha, beta=cfg.noise_beta_beta, noise_s=cfg.noise_s,
                               state_dropout_prob=cfg.state_dropout_prob if self.training else 0.0)

    def training_terms(self, batch: GrootBatch, draws: FlowDraws | None = None) -> dict[str, torch.Tensor]:
        """Loss and intermediates (see GrootActionHead.training_terms); draws from the generator unless given."""
        if batch.actions is None or batch.action_mask is None:
            raise ValueError("the batch has no actions; training needs them (inference: sample_actions)")
        draws = (draws if draws is not None else self.draw(batch)).to(batch.actions.device)
        inputs = self.head_inputs(batch)
        actions = batch.actions.to(inputs.features.dtype)
        return self.action_head.training_terms(inputs, actions, batch.action_mask, noise=draws.noise.to(actions.dtype),
                                               t=draws.t, drop_state=draws.drop_state)

    def forward(self, batch: GrootBatch) -> ModelOutput:
        """Training loss ``sum(MSE * action_mask) / (sum(action_mask) + 1e-6)`` (no host sync)."""
        return ModelOutput(loss=self.training_terms(batch)["loss"], metrics={})

    @torch.no_grad()
    def sample_actions(self, batch: GrootBatch, noise: torch.Tensor | None = None,
                       num_steps: int | None = None) -> torch.Tensor:
        """Normalized actions [B, model.action_horizon, model.max_action_dim] (``noise`` from torch's RNG unless
        given); the transforms' postprocess_actions keeps the data horizon and dims and unnormalizes."""
        cfg = self.config
        inputs = self.head_inputs(batch)
        if noise is None:
            noise = torch.randn(batch.batch_size, cfg.action_horizon, cfg.max_action_dim, device=batch.state.device)
        x = self.action_head.sample(inputs, noise.to(inputs.features.dtype), num_steps or cfg.num_inference_steps)
        return x.float()


def build_model(model_config: GrootModelConfig, data_config: GrootDataConfig) -> GrootN17Model:
    """Model factory of the ``groot_n1_7`` / ``groot_n1_7_tiny`` plugins (random init; see checkpoint.py to load)."""
    return GrootN17Model(model_config, data_config)
