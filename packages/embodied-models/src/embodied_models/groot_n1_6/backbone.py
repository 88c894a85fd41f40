"""GR00T N1.6's backbone: Eagle3 (SigLIP2 vision tower, pixel-unshuffle projector, Qwen3 language model cut to its
first ``select_layer`` layers), as LoongForge's ``EagleBackbone`` runs it.

The language side is built from transformers' Qwen3 classes and a config (``Qwen3DecoderLayer``, ``Qwen3RMSNorm``,
``Qwen3RotaryEmbedding``; never a hub download); the vision tower is siglip2.py. Written here: pixel normalization
(images cross the DataLoader as uint8), the projector per image (``pixel_unshuffle`` 2 x 2, then
``mlp1 = LayerNorm -> Linear -> GELU -> Linear``), the image-token scatter, the causal + padding mask and the layer
loop. The features are the final RMSNorm of the last kept layer (LoongForge pops the later layers and reads
``hidden_states[-1]``, which transformers takes after the norm); no LM head is built.

Prompts are left-padded and the RoPE positions are the plain column index 0..L-1 (LoongForge's eager path passes no
``position_ids``), so a row's first real token sits at its pad count. Padded query rows attend to nothing; torch >=
2.5 SDPA gives zeros there, and the action head masks those keys out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers.models.qwen3.configuration_qwen3 import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, Qwen3RMSNorm, Qwen3RotaryEmbedding

from embodied_models.groot.backbone import (
    causal_padding_mask,
    language_config_kwargs,
    normalize_pixels,
    register_pixel_stats,
    reset_pixel_stats,
    reset_rope,
)
from embodied_models.groot_n1_6.config import GrootN16ModelConfig
from embodied_models.groot_n1_6.siglip2 import Siglip2VisionTower

__all__ = ["EagleBackbone", "causal_padding_mask", "pixel_unshuffle_tokens", "qwen3_config"]  # the mask: groot.backbone

MAX_POSITIONS = 40960
"""Qwen3-1.7B's max_position_embeddings (only read by dynamic RoPE variants, which it does not use)."""


def qwen3_config(cfg: GrootN16ModelConfig) -> Qwen3Config:
    """The transformers config of the language model with ``select_layer`` layers."""
    text = Qwen3Config(**language_config_kwargs(cfg, MAX_POSITIONS), use_sliding_window=False,
                       rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta})
    text._attn_implementation = "sdpa"
    return text


def pixel_unshuffle_tokens(tokens: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Vision tokens [N, h * w, C] (raster) -> [N, (h / 2) (w / 2), 4 C]: ``F.pixel_unshuffle`` by 2, channel-major
    inside a token (``out[c * 4 + i * 2 + j] = in[c, 2 Y + i, 2 X + j]``), tokens row-major."""
    n, _, c = tokens.shape
    grid = tokens.transpose(1, 2).reshape(n, c, h, w)
    return F.pixel_unshuffle(grid, 2).flatten(2).transpose(1, 2)


class EagleBackbone(nn.Module):
    """SigLIP2 tower + projector + the first ``select_layer`` Qwen3 layers + the final norm -> features
    [B, L, llm_width].

    Args:
        config: the model section (backbone sizes, ``tune_llm`` / ``tune_visual`` / ``tune_top_llm_layers``).
    """

    def __init__(self, config: GrootN16ModelConfig) -> None:
        super().__init__()
        self.config = config
        text = qwen3_config(config)
        self.text_config = text
        self.vision = Siglip2VisionTower(config)
        merged = 4 * config.vision_width
        self.projector = nn.Sequential(nn.LayerNorm(merged), nn.Linear(merged, config.llm_width), nn.GELU(),
                                       nn.Linear(config.llm_width, config.llm_width))
        self.embed_tokens = nn.Embedding(config.vocab_size, config.llm_width)
        self.layers = nn.ModuleList(Qwen3DecoderLayer(text, i) for i in range(config.select_layer))
        self.norm = Qwen3RMSNorm(config.llm_width, eps=config.rms_norm_eps)
        self.rotary_emb = Qwen3RotaryEmbedding(text)
        self.gradient_checkpointing = False
        register_pixel_stats(self, config.image_mean, config.image_std)
        self.set_trainable(tune_llm=config.tune_llm, tune_visual=config.tune_visual,
                           tune_top_llm_layers=config.tune_top_llm_layers)

    def set_trainable(self, *, tune_llm: bool, tune_visual: bool, tune_top_llm_layers: int) -> None:
        """LoongForge's rule: the language model (embeddings, layers, norm) trains with ``tune_llm``, the tower and
        the projector with ``tune_visual``, and the last ``tune_top_llm_layers`` kept layers always."""
        self.tune_llm, self.tune_visual = tune_llm, tune_visual
        for module in (self.embed_tokens, self.layers, self.norm):
            module.requires_grad_(tune_llm)
        self.vision.requires_grad_(tune_visual)
        self.projector.requires_grad_(tune_visual)
        if tune_top_llm_layers:
            for layer in self.layers[-tune_top_llm_layers:]:
                layer.requires_grad_(True)

    def train(self, mode: bool = True) -> EagleBackbone:
        """Frozen parts stay in eval mode while training (LoongForge's set_frozen_modules_to_eval_mode: the language
        model without tune_llm, the tower and projector without tune_visual)."""
        super().train(mode)
        if mode:
            if not self.tune_llm:
                self.layers.eval()
            if not self.tune_visual:
                self.vision.eval()
                self.projector.eval()
        return self

    @torch.no_grad()
    def init_non_persistent_buffers(self) -> None:
        """Recomputes the RoPE table and pixel statistics (after building on the meta device + to_empty)."""
        reset_rope(self.rotary_emb, self.text_config)
        reset_pixel_stats(self, self.config.image_mean, self.config.image_std)

    # ------------------------------------------------------------------ vision
    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images [N, 3, H, W] -> ``(x / 255 - mean) / std`` in float32 (Eagle's image processor)."""
        return normalize_pixels(images, self.image_mean, self.image_std)

    def image_tokens(self, pixel_values: Sequence[torch.Tensor]) -> torch.Tensor:
        """Normalized images ([3, H, W] each, flat over the batch) -> projector tokens [sum (H/2p)(W/2p), llm_width]
        in image order."""
        patch = self.config.vision_patch_size
        dtype = self.vision.embeddings.patch_embedding.weight.dtype
        towers = self.vision([p.to(dtype) for p in pixel_values])
        merged = [pixel_unshuffle_tokens(t[None], p.shape[-2] // patch, p.shape[-1] // patch)[0]
                  for t, p in zip(towers, pixel_values, strict=True)]
        return self.projector(torch.cat(merged, dim=0))

    # ------------------------------------------------------------------ language
    def _layer(self, layer: nn.Module, *args: Any, **kwargs: Any) -> torch.Tensor:
        trainable = any(p.requires_grad for p in layer.parameters())
        if self.gradient_checkpointing and self.training and trainable and torch.is_grad_enabled():
            return checkpoint(layer, *args, use_reentrant=False, **kwargs)
        return layer(*args, **kwargs)

    def language(self, embeds: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The kept layers and the final norm over ``embeds`` [B, L, llm_width] (left-padded rows)."""
        batch, length = attention_mask.shape
        positions = torch.arange(length, device=embeds.device).expand(batch, -1)
        cos_sin = self.rotary_emb(embeds, positions)
        mask = causal_padding_mask(attention_mask)
        hidden = embeds
        for layer in self.layers:
            hidden = self._layer(layer, hidden, position_embeddings=cos_sin, attention_mask=mask)
        return self.norm(hidden)

    def embed(self, pixel_values: Sequence[torch.Tensor], input_ids: torch.Tensor,
              image_mask: torch.Tensor) -> torch.Tensor:
        """Token embeddings [B, L, llm_width] with the image tokens (``image_mask``, row-major over batch and
        position) replaced in order by the projector tokens of ``pixel_values`` (flat image list)."""
        embeds = self.embed_tokens(input_ids)
        tokens = self.image_tokens(pixel_values).to(embeds.dtype)
        return embeds.masked_scatter(image_mask.unsqueeze(-1).expand_as(embeds), tokens)

    def forward_pixels(self, pixel_values: Sequence[torch.Tensor], input_ids: torch.Tensor,
                       attention_mask: torch.Tensor, image_mask: torch.Tensor) -> torch.Tensor:
        """Features [B, L, llm_width] from normalized images (flat list, element order then image order)."""
        return self.language(self.embed(pixel_values, input_ids, image_mask), attention_mask)

    def forward(self, images: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                image_mask: torch.Tensor) -> torch.Tensor:
        """Features [B, L, llm_width] of prompts whose image tokens (``image_mask``) stand for ``images``.

        Args:
            images: uint8 [B, V, 3, H, W]; the V views of a sample fill its image-token spans in order.
            input_ids: int64 [B, L] (left-padded).
            attention_mask: bool [B, L], True for real tokens.
            image_mask: bool [B, L], True for image tokens.
        """
        pixels = self.normalize(images.flatten(0, 1))
        return self.forward_pixels(list(pixels), input_ids, attention_mask, image_mask)
