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

from embodied_models.groot.dit import GrootBlock
from embodied_models.groot.draws import DrawStream
from embodied_models.groot.head import ActionHeadInputs
from embodied_models.groot.model import DIT_LORA_TARGETS, LLM_PROJECTIONS, GrootModel
from embodied_models.groot_n1_6.action_head import GrootN16ActionHead
from embodied_models.groot_n1_6.backbone import EagleBackbone
from embodied_models.groot_n1_6.batch import GrootN16Batch
from embodied_models.groot_n1_6.checks import size_problems
from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig
from embodied_models.groot_n1_6.siglip2 import Siglip2EncoderLayer

__all__ = ["GrootN16Model", "build_model"]

_VISION_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj", "mlp.fc1",
                       "mlp.fc2")


class GrootN16Model(GrootModel):
    """The GR00T N1.6 network (``backbone.*`` + ``action_head.*``); the generator members, the draws, the loss and
    sampling are :class:`~embodied_models.groot.model.GrootModel`'s (shared with N1.7; no state dropout here).

    Args:
        config: network sizes, trainability switches and flow constants.
        data_config: the real action width and the data horizon (checked against the model's limits).
    """

    state_dropout = False

    def __init__(self, config: GrootN16ModelConfig, data_config: GrootN16DataConfig) -> None:
        super().__init__()
        self.check_sizes("GR00T N1.6", size_problems(config, data_config) + config.validate())
        self.config = config
        self.backbone = EagleBackbone(config)
        self.action_head = GrootN16ActionHead(config)
        self.backbone.gradient_checkpointing = config.gradient_checkpointing
        self.backbone.vision.gradient_checkpointing = config.gradient_checkpointing
        self.action_head.set_gradient_checkpointing(config.gradient_checkpointing)
        self.draws = DrawStream()

    # ------------------------------------------------------------------ protocol members
    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """DiT blocks, language decoder layers and vision encoder layers."""
        return (GrootBlock, Qwen3DecoderLayer, Siglip2EncoderLayer)

    def default_lora_targets(self) -> tuple[str, ...]:
        """The DiT's attention and FFN projections, plus the attention and MLP projections of every backbone layer
        that trains (all language layers with ``model.tune_llm``, else the top ``model.tune_top_llm_layers``; the
        vision layers with ``model.tune_visual``). See README.md."""
        cfg = self.config
        first = 0 if cfg.tune_llm else cfg.select_layer - cfg.tune_top_llm_layers
        llm = tuple(f"backbone.layers.{i}.{name}" for i in range(first, cfg.select_layer) for name in LLM_PROJECTIONS)
        vision = tuple(f"backbone.vision.encoder.layers.*.{name}" for name in _VISION_PROJECTIONS) \
            if cfg.tune_visual else ()
        return (*DIT_LORA_TARGETS, *llm, *vision)

    def load_pretrained_checkpoint(self, path: str | Path, **allow: Any) -> Any:
        """Loads an official GR00T N1.6 / LoongForge / own-layout checkpoint through the declared key map (strict).

        ``allow`` takes checkpoint.load_groot_n1_6_checkpoint's allow_missing / allow_unexpected / allow_mismatched.
        """
        from embodied_models.groot_n1_6.checkpoint import load_groot_n1_6_checkpoint

        return load_groot_n1_6_checkpoint(self, path, **allow)

    # ------------------------------------------------------------------ forward
    def backbone_features(self, batch: GrootN16Batch) -> torch.Tensor:
        """Eagle3 features [B, L, llm_width] of the batch's views and prompts."""
        return self.backbone(batch.images, batch.input_ids, batch.attention_mask, batch.image_mask)

    def pixel_head_inputs(self, pixel_values: Sequence[torch.Tensor], input_ids: torch.Tensor,
                          attention_mask: torch.Tensor, image_mask: torch.Tensor, state: torch.Tensor,
                          embodiment_id: torch.Tensor) -> ActionHeadInputs:
        """The head's inputs from already normalized images of any sizes (LoongForge's ``pixel_values`` list: flat
        over the batch, element order then image order)."""
        features = self.backbone.forward_pixels(pixel_values, input_ids, attention_mask, image_mask)
        return self.head_inputs_from(features, attention_mask, image_mask, state, embodiment_id)


def build_model(model_config: GrootN16ModelConfig, data_config: GrootN16DataConfig) -> GrootN16Model:
    """Model factory of the ``groot_n1_6`` / ``groot_n1_6_tiny`` plugins (random init; see checkpoint.py to load)."""
    return GrootN16Model(model_config, data_config)
