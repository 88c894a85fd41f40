"""What the GR00T backbones (N1.6's Eagle3, N1.7's Qwen3-VL) do the same way around their language layers.

Both cut a Qwen3-family language model to its first ``model.select_layer`` layers, built from a transformers text
config (:func:`language_config_kwargs`: the sizes every such config takes from the model section), run them over
left-padded prompts under one boolean causal + padding mask (:func:`causal_padding_mask`), and normalize uint8
views in the model with the processor's statistics (:func:`register_pixel_stats`, :func:`normalize_pixels`),
buffers that are rebuilt after building on the meta device (:func:`reset_pixel_stats`, :func:`reset_rope`).
The towers, the projector / merger, the positions and what the features are differ (see README.md).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["causal_padding_mask", "language_config_kwargs", "normalize_pixels", "register_pixel_stats",
           "reset_pixel_stats", "reset_rope"]


def language_config_kwargs(cfg: Any, max_positions: int) -> dict[str, Any]:
    """Keyword arguments of a transformers Qwen3 / Qwen3-VL text config from a GR00T model section: the
    ``select_layer`` kept layers at the ``llm_*`` sizes, SiLU MLPs, no attention bias (the rope settings differ)."""
    return {"vocab_size": cfg.vocab_size, "hidden_size": cfg.llm_width, "intermediate_size": cfg.llm_mlp_dim,
            "num_hidden_layers": cfg.select_layer, "num_attention_heads": cfg.llm_num_heads,
            "num_key_value_heads": cfg.llm_num_kv_heads, "head_dim": cfg.llm_head_dim, "hidden_act": "silu",
            "max_position_embeddings": max_positions, "rms_norm_eps": cfg.rms_norm_eps, "attention_bias": False}


def causal_padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Boolean SDPA mask [B, 1, L, L]: key k is visible to query q when k <= q and k is a real token."""
    length = attention_mask.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool, device=attention_mask.device).tril()
    return causal[None, None] & attention_mask.bool()[:, None, None, :]


def register_pixel_stats(module: nn.Module, mean: list[float], std: list[float]) -> None:
    """Registers the non-persistent float32 buffers ``image_mean`` / ``image_std`` [1, 3, 1, 1] on ``module``."""
    module.register_buffer("image_mean", torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1), persistent=False)
    module.register_buffer("image_std", torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1), persistent=False)


@torch.no_grad()
def reset_pixel_stats(module: nn.Module, mean: list[float], std: list[float]) -> None:
    """Refills the buffers of :func:`register_pixel_stats` (after building on the meta device + to_empty)."""
    module.image_mean.copy_(torch.tensor(mean).view(1, 3, 1, 1))
    module.image_std.copy_(torch.tensor(std).view(1, 3, 1, 1))


@torch.no_grad()
def reset_rope(rotary_emb: nn.Module, text_config: Any) -> None:
    """Recomputes a transformers text rotary embedding's ``inv_freq`` / ``original_inv_freq`` from its config."""
    inv_freq, _ = rotary_emb.compute_default_rope_parameters(text_config)
    rotary_emb.inv_freq.copy_(inv_freq)
    rotary_emb.original_inv_freq.copy_(inv_freq)


def normalize_pixels(images: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """uint8 images [N, 3, H, W] -> ``(x / 255 - mean) / std`` in float32 (both processors' rescale and normalize)."""
    return (images.to(torch.float32) * (1.0 / 255.0) - mean) / std
