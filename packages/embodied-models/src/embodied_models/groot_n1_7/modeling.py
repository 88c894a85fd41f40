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

from embodied_models.groot.dit import GrootBlock
from embodied_models.groot.draws import DrawStream
from embodied_models.groot.model import DIT_LORA_TARGETS, LLM_PROJECTIONS, GrootModel
from embodied_models.groot_n1_7.action_head import GrootActionHead
from embodied_models.groot_n1_7.backbone import GrootBackbone
from embodied_models.groot_n1_7.batch import GrootBatch
from embodied_models.groot_n1_7.checks import size_problems
from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig

__all__ = ["GrootN17Model", "build_model"]

_BACKBONE_LORA = tuple(f"backbone.layers.*.{name}" for name in LLM_PROJECTIONS)


class GrootN17Model(GrootModel):
    """The GR00T N1.7 network (``backbone.*`` + ``action_head.*``); the generator members, the draws (with state
    dropout), the loss and sampling are :class:`~embodied_models.groot.model.GrootModel`'s (shared with N1.6).

    Args:
        config: network sizes and flow constants.
        data_config: the real action width and the data horizon (checked against the model's limits).
    """

    def __init__(self, config: GrootModelConfig, data_config: GrootDataConfig) -> None:
        super().__init__()
        self.check_sizes("GR00T N1.7", size_problems(config, data_config) + config.validate())
        self.config = config
        self.backbone = GrootBackbone(config)
        self.action_head = GrootActionHead(config)
        self.backbone.gradient_checkpointing = config.gradient_checkpointing
        self.action_head.set_gradient_checkpointing(config.gradient_checkpointing)
        self.draws = DrawStream()

    # ------------------------------------------------------------------ protocol members
    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """DiT and VL self-attention blocks, backbone decoder layers and vision blocks."""
        return (GrootBlock, Qwen3VLTextDecoderLayer, Qwen3VLVisionBlock)

    def default_lora_targets(self) -> tuple[str, ...]:
        """The DiT's attention and FFN projections; with ``model.tune_llm`` also the backbone layers' attention and
        MLP projections (a frozen backbone gets no adapters). See README.md."""
        return (*DIT_LORA_TARGETS, *(_BACKBONE_LORA if self.config.tune_llm else ()))

    def load_pretrained_checkpoint(self, path: str | Path, **allow: Any) -> Any:
        """Loads an official GR00T N1.7 / lerobot / own-layout checkpoint through the declared key map (strict).

        ``allow`` takes checkpoint.load_groot_checkpoint's allow_missing / allow_unexpected / allow_mismatched.
        """
        from embodied_models.groot_n1_7.checkpoint import load_groot_checkpoint

        return load_groot_checkpoint(self, path, **allow)

    def train(self, mode: bool = True) -> GrootN17Model:
        """Training mode; the frozen backbone parts stay in eval mode."""
        super().train(mode)
        self.backbone.train(mode)
        return self

    # ------------------------------------------------------------------ forward
    def backbone_features(self, batch: GrootBatch) -> torch.Tensor:
        """Qwen3-VL features [B, L, llm_width] of the batch's views and prompts (its M-RoPE positions)."""
        return self.backbone(batch.images, batch.input_ids, batch.attention_mask, batch.image_mask,
                             batch.position_ids)


def build_model(model_config: GrootModelConfig, data_config: GrootDataConfig) -> GrootN17Model:
    """Model factory of the ``groot_n1_7`` / ``groot_n1_7_tiny`` plugins (random init; see checkpoint.py to load)."""
    return GrootN17Model(model_config, data_config)
