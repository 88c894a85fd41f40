"""GR00T N1.7's backbone: Cosmos-Reason2-2B (a Qwen3-VL 2B) cut to its first ``select_layer`` language layers.

Built from transformers' Qwen3-VL classes and a config (never a hub download): the whole vision tower
(``Qwen3VLVisionModel``: patch embedding, interpolated position table, 2-D RoPE blocks, the merger and the
DeepStack mergers) and the language model's own ``Qwen3VLTextDecoderLayer`` / ``Qwen3VLTextRotaryEmbedding``.
Written here: the pixel patchification (the Qwen2-VL image processor's layout, so images cross the DataLoader as
uint8), the image-token scatter, the multimodal (t, h, w) RoPE positions of left-padded prompts (positions.py; the
collate function computes them on the host), the causal and padding mask, the DeepStack additions after the first
layers and the layer loop. Only ``select_layer`` layers are
built; the features are the last one's output, before the final RMSNorm (the tensor GR00T trains on), so the
model has no final norm and no LM head.

Padded query rows (left padding) attend to nothing; torch >= 2.5 SDPA returns zeros for them, which is what the
flash-attention path of the reference produces. Their outputs still matter: the action head's VL self-attention
is unmasked (see dit.py).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig, Qwen3VLVisionConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import (
    Qwen3VLTextDecoderLayer,
    Qwen3VLTextRotaryEmbedding,
    Qwen3VLVisionModel,
)

from embodied_models.groot.backbone import (
    causal_padding_mask,
    language_config_kwargs,
    normalize_pixels,
    register_pixel_stats,
    reset_pixel_stats,
    reset_rope,
)
from embodied_models.groot_n1_7.config import GrootModelConfig
from embodied_models.groot_n1_7.positions import mrope_positions

__all__ = ["GrootBackbone", "causal_padding_mask", "patchify", "qwen3vl_configs"]  # the mask: groot.backbone

MAX_POSITIONS = 262144
"""Cosmos-Reason2-2B's max_position_embeddings (only read by dynamic RoPE variants, which it does not use)."""


def qwen3vl_configs(cfg: GrootModelConfig) -> tuple[Qwen3VLTextConfig, Qwen3VLVisionConfig]:
    """The transformers configs of the language model (``select_layer`` layers) and the vision tower."""
    text = Qwen3VLTextConfig(**language_config_kwargs(cfg, MAX_POSITIONS), rope_parameters={
        "rope_type": "default", "rope_theta": cfg.rope_theta, "mrope_section": list(cfg.mrope_section),
        "mrope_interleaved": True})
    text._attn_implementation = "sdpa"
    vision = Qwen3VLVisionConfig(
        depth=cfg.vision_depth, hidden_size=cfg.vision_width, intermediate_size=cfg.vision_mlp_dim,
        num_heads=cfg.vision_num_heads, in_channels=3, patch_size=cfg.vision_patch_size,
        spatial_merge_size=cfg.vision_merge_size, temporal_patch_size=cfg.vision_temporal_patch_size,
        out_hidden_size=cfg.llm_width, num_position_embeddings=cfg.vision_num_position_embeddings,
        deepstack_visual_indexes=list(cfg.deepstack_layers), hidden_act="gelu_pytorch_tanh")
    vision._attn_implementation = "sdpa"
    return text, vision


def patchify(pixels: torch.Tensor, *, patch: int, merge: int, temporal: int) -> torch.Tensor:
    """Normalized images [N, C, H, W] -> flat patches [N * gh * gw, C * temporal * patch * patch].

    The Qwen2-VL / Qwen3-VL image processor's layout: patches grouped by merge window (row-major over the
    merged grid, then within the window), each patch ``(C, temporal, patch, patch)`` with the still image repeated
    over the temporal axis.
    """
    n, c, h, w = pixels.shape
    gh, gw = h // patch, w // patch
    x = pixels.reshape(n, c, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.permute(0, 2, 5, 3, 6, 1, 4, 7)  # n, gh/m, gw/m, m, m, c, p, p
    x = x.unsqueeze(-3).expand(*x.shape[:-2], temporal, patch, patch)
    return x.reshape(n * gh * gw, c * temporal * patch * patch)


class GrootBackbone(nn.Module):
    """Vision tower + the first ``select_layer`` Qwen3-VL language layers; returns features [B, L, llm_width].

    Args:
        config: the model section (backbone sizes, ``tune_llm`` / ``tune_visual``).
    """

    def __init__(self, config: GrootModelConfig) -> None:
        super().__init__()
        self.config = config
        text, vision = qwen3vl_configs(config)
        self.text_config = text
        self.visual = Qwen3VLVisionModel(vision)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.llm_width)
        self.layers = nn.ModuleList(Qwen3VLTextDecoderLayer(text, i) for i in range(config.select_layer))
        self.rotary_emb = Qwen3VLTextRotaryEmbedding(text)
        self.gradient_checkpointing = False
        register_pixel_stats(self, config.image_mean, config.image_std)
        self.set_trainable(tune_llm=config.tune_llm, tune_visual=config.tune_visual)

    def set_trainable(self, *, tune_llm: bool, tune_visual: bool) -> None:
        """Freezes the language part (embeddings + layers) and/or the vision tower."""
        self.tune_llm, self.tune_visual = tune_llm, tune_visual
        self.embed_tokens.requires_grad_(tune_llm)
        self.layers.requires_grad_(tune_llm)
        self.visual.requires_grad_(tune_visual)

    def train(self, mode: bool = True) -> GrootBackbone:
        """Frozen parts stay in eval mode while training (as GR00T's set_frozen_modules_to_eval_mode)."""
        super().train(mode)
        if mode:
            if not self.tune_llm:
                self.layers.eval()
            if not self.tune_visual:
                self.visual.eval()
        return self

    @torch.no_grad()
    def init_non_persistent_buffers(self) -> None:
        """Recomputes the RoPE tables and pixel statistics (after building on the meta device + to_empty)."""
        reset_rope(self.rotary_emb, self.text_config)
        rotary = self.visual.rotary_pos_emb
        vision_inv, _ = rotary.compute_axial_rope_parameters(rotary.config)
        rotary.inv_freq.copy_(vision_inv)
        rotary.original_inv_freq.copy_(vision_inv)
        reset_pixel_stats(self, self.config.image_mean, self.config.image_std)

    # ------------------------------------------------------------------ vision
    def grid(self, height: int, width: int) -> tuple[int, int]:
        """Merged token grid (rows, cols) of an image of ``height`` x ``width`` pixels."""
        step = self.config.vision_patch_size * self.config.vision_merge_size
        return height // step, width // step

    def pixel_values(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """uint8 images [N, 3, H, W] -> (flat normalized patches, grid_thw [N, 3]) as the Qwen3-VL processor gives."""
        cfg = self.config
        pixels = normalize_pixels(images, self.image_mean, self.image_std)
        flat = patchify(pixels, patch=cfg.vision_patch_size, merge=cfg.vision_merge_size,
                        temporal=cfg.vision_temporal_patch_size)
        n, _, h, w = images.shape
        grid = torch.tensor([[1, h // cfg.vision_patch_size, w // cfg.vision_patch_size]] * n, dtype=torch.long,
                            device=images.device)
        return flat, grid

    def image_features(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Merged image tokens [N * tokens, llm_width] and the DeepStack features (one tensor per deepstack layer)."""
        flat, grid = self.pixel_values(images)
        out = self.visual(flat.to(self.visual.patch_embed.proj.weight.dtype), grid_thw=grid)
        return out.pooler_output, list(out.deepstack_features)

    # ------------------------------------------------------------------ language
    def _layer(self, layer: nn.Module, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.gradient_checkpointing and self.training and self.tune_llm and torch.is_grad_enabled():
            return checkpoint(layer, *args, use_reentrant=False, **kwargs)
        return layer(*args, **kwargs)

    def forward(self, images: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                image_mask: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Features [B, L, llm_width] of prompts whose image tokens (``image_mask``) stand for ``images``.

        Args:
            images: uint8 [B, V, 3, H, W]; the V views of a sample fill its image-token runs in order.
            input_ids: int64 [B, L] (left-padded).
            attention_mask: bool [B, L], True for real tokens.
            image_mask: bool [B, L], True for image tokens.
            position_ids: int64 [3, B, L] multimodal RoPE positions (the collate function computes them on the
                host); None: computed here.
        """
        image_embeds, deepstack = self.image_features(images.flatten(0, 1))
        hidden = self.embed_tokens(input_ids)
        scatter = image_mask.unsqueeze(-1).expand_as(hidden)
        hidden = hidden.masked_scatter(scatter, image_embeds.to(hidden.dtype))
        if position_ids is None:
            position_ids = mrope_positions(attention_mask, image_mask, self.grid(*images.shape[-2:]))
        cos_sin = self.rotary_emb(hidden, position_ids.to(hidden.device))
        mask = causal_padding_mask(attention_mask)
        for index, layer in enumerate(self.layers):
            hidden = self._layer(layer, hidden, position_embeddings=cos_sin, attention_mask=mask)
            if index < len(deepstack):
                # DeepStack: the deepstack features are added to the image tokens (scatter, no host sync)
                extra = torch.zeros_like(hidden).masked_scatter(scatter, deepstack[index].to(hidden.dtype))
                hidden = hidden + extra
        return hidden
