"""The SigLIP2 vision tower of Eagle3 (GR00T N1.6's backbone) with its tile-window attention and 2-D RoPE.

Port of the computation of LoongForge's vendored ``eagle3_model/modeling_siglip2.py`` (``c6275661``), which extends
transformers' SigLIP2 (NaFlex) with two switches the released Eagle-Block2A-2B-v2 config turns off
(``use_windows_attn``, ``use_rope``) and the fixture turns on; transformers' own ``Siglip2VisionModel`` computes the
tower only with both off (tested). So transformers' ``Siglip2VisionEmbeddings`` (patch Linear + the resized position
table) and ``Siglip2MLP`` are used as they are, built from a ``Siglip2VisionConfig``, and the attention (RoPE, tile
mask) and the layer loop are written here, under the checkpoint's parameter names. SigLIP2's attention-pooling head
(``head.*``) is transformers' ``Siglip2MultiheadAttentionPoolingHead``, built as the official module has it
(``model.vision_pooling_head``); Eagle never reads it, so it never runs here and is always frozen.

Per image of H x W pixels (h = H / p, w = W / p patches; no padding tokens):

1. patches in (row in patch, column in patch, channel) order -> ``patch_embedding`` (Linear);
2. plus the learned position table (G x G, G = sqrt(num_patches)) resized to (h, w) by bilinear antialiased
   interpolation in float32 (transformers computes F.interpolate's weights explicitly; same values to ~1e-7);
3. encoder layers ``h += out_proj(attn(LN1(h)))``, ``h += fc2(gelu_tanh(fc1(LN2(h))))``; attention is within the
   image, or within the token's window x window tile (row-major tiles, the last ones smaller) in windowed layers;
   with RoPE, q and k (not v) rotate per head by ``[x f_0, y f_0, x f_1, y f_1, ...]`` (column first, absolute patch
   coordinates), ``f_i = window_size^(-4 i / head_dim)``: LoongForge passes window_size as Rope2DPosEmb's theta_base;
4. ``post_layernorm``.

LoongForge packs the tiles (tile-major order) and runs flash-attention's varlen kernel over them; attention within
a segment does not depend on the order of its tokens, so here the tokens stay in raster order and a windowed layer
uses a block-diagonal mask over each image (same math; the sums run in another order, ~1e-7). Without flash-attn
LoongForge's SDPA fallback mixes all images and tiles in one attention (wrong: its fixture README measured it);
this tower never attends across images or, in windowed layers, across tiles. Images of one size run as a batch.

Shape legend: N images of one size, T = h * w tokens, C width, Hd heads, D head_dim.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers.models.siglip2.configuration_siglip2 import Siglip2VisionConfig
from transformers.models.siglip2.modeling_siglip2 import (
    Siglip2MLP,
    Siglip2MultiheadAttentionPoolingHead,
    Siglip2VisionEmbeddings,
)

from embodied_models.groot_n1_6.config import GrootN16ModelConfig

__all__ = ["Siglip2VisionTower", "patchify", "rope_angles", "siglip2_config", "window_ids"]


def siglip2_config(cfg: GrootN16ModelConfig) -> Siglip2VisionConfig:
    """The transformers config of the tower's embeddings and MLPs."""
    return Siglip2VisionConfig(hidden_size=cfg.vision_width, intermediate_size=cfg.vision_mlp_dim,
                               num_hidden_layers=cfg.vision_depth, num_attention_heads=cfg.vision_num_heads,
                               num_channels=3, patch_size=cfg.vision_patch_size, num_patches=cfg.vision_num_patches,
                               hidden_act="gelu_pytorch_tanh", layer_norm_eps=cfg.vision_layer_norm_eps)


def patchify(pixels: torch.Tensor, patch: int) -> torch.Tensor:
    """[N, C, H, W] -> [N, h * w, p * p * C] in (row in patch, column in patch, channel) order, patches row-major."""
    n, c, height, width = pixels.shape
    h, w = height // patch, width // patch
    x = pixels.reshape(n, c, h, patch, w, patch).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(n, h * w, patch * patch * c)


def window_ids(h: int, w: int, window: int, device: torch.device | None = None) -> torch.Tensor:
    """int64 [h * w]: the row-major index of each raster token's window x window tile."""
    rows = torch.arange(h, device=device) // window
    cols = torch.arange(w, device=device) // window
    tiles_per_row = -(-w // window)
    return (rows[:, None] * tiles_per_row + cols[None, :]).reshape(-1)


def rope_angles(h: int, w: int, head_dim: int, theta: float, device: torch.device | None = None) -> torch.Tensor:
    """float32 [h * w, head_dim / 2]: the 2-D rotation angle of each (real, imag) pair, ``[x f_0, y f_0, x f_1, ...]``
    with ``f_i = 1 / theta^(4 i / head_dim)`` (the reference's float32 arithmetic)."""
    exponents = torch.arange(0, head_dim, 4, device=device)[: head_dim // 4].float()
    freqs = 1.0 / (theta ** (exponents / head_dim))
    ys = torch.arange(h, device=device).float().repeat_interleave(w)
    xs = torch.arange(w, device=device).float().repeat(h)
    x_angles = torch.outer(xs, freqs)
    y_angles = torch.outer(ys, freqs)
    return torch.stack([x_angles, y_angles], dim=-1).reshape(h * w, head_dim // 2)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotates the (2j, 2j+1) pairs of ``x`` [N, T, Hd, D] (as complex numbers) by the angles' cos / sin [T, D/2]."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    real, imag = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[None, :, None], sin[None, :, None]
    out = torch.stack([real * cos - imag * sin, real * sin + imag * cos], dim=-1)
    return out.flatten(-2).to(x.dtype)


class Siglip2Attention(nn.Module):
    """Multi-head attention with biases, optional 2-D RoPE on q / k, and an optional boolean key mask."""

    def __init__(self, width: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = width // num_heads
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.q_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, hidden: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
                mask: torch.Tensor | None) -> torch.Tensor:
        """``hidden`` [N, T, C]; ``rope`` (cos, sin) [T, D/2] or None; ``mask`` bool [T, T] (True: attend) or None."""
        n, t, _ = hidden.shape
        shape = (n, t, self.num_heads, self.head_dim)
        q, k, v = self.q_proj(hidden).view(shape), self.k_proj(hidden).view(shape), self.v_proj(hidden).view(shape)
        if rope is not None:
            q, k = _rotate(q, *rope), _rotate(k, *rope)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             attn_mask=mask, scale=self.head_dim ** -0.5)
        return self.out_proj(out.transpose(1, 2).reshape(n, t, -1))


class Siglip2EncoderLayer(nn.Module):
    """Pre-norm attention block and MLP block, each with a residual."""

    def __init__(self, config: GrootN16ModelConfig, vision_config: Siglip2VisionConfig) -> None:
        super().__init__()
        width, eps = config.vision_width, config.vision_layer_norm_eps
        self.layer_norm1 = nn.LayerNorm(width, eps=eps)
        self.self_attn = Siglip2Attention(width, config.vision_num_heads)
        self.layer_norm2 = nn.LayerNorm(width, eps=eps)
        self.mlp = Siglip2MLP(vision_config)

    def forward(self, hidden: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
                mask: torch.Tensor | None) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.layer_norm1(hidden), rope, mask)
        return hidden + self.mlp(self.layer_norm2(hidden))


class Siglip2Encoder(nn.Module):
    """The encoder layers (windowed unless in ``vision_full_attention_layers`` when windows are on)."""

    def __init__(self, config: GrootN16ModelConfig, vision_config: Siglip2VisionConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Siglip2EncoderLayer(config, vision_config) for _ in range(config.vision_depth))


class Siglip2VisionTower(nn.Module):
    """Embeddings, encoder and ``post_layernorm``; with ``model.vision_pooling_head`` also the checkpoint's
    attention-pooling ``head`` (transformers' module), which Eagle never reads: it never runs, stays frozen whatever
    ``requires_grad_`` asks (so DDP / FSDP see no unused trainable parameters) and stays in eval mode.

    Args:
        config: the model section (vision sizes and switches).
    """

    def __init__(self, config: GrootN16ModelConfig) -> None:
        super().__init__()
        self.config = config
        vision_config = siglip2_config(config)
        self.embeddings = Siglip2VisionEmbeddings(vision_config)
        self.encoder = Siglip2Encoder(config, vision_config)
        self.post_layernorm = nn.LayerNorm(config.vision_width, eps=config.vision_layer_norm_eps)
        self.head = Siglip2MultiheadAttentionPoolingHead(vision_config) if config.vision_pooling_head else None
        if self.head is not None:
            self.head.requires_grad_(False)
        full = set(config.vision_full_attention_layers)
        self.windowed = [config.vision_windowed_attention and i not in full for i in range(config.vision_depth)]
        self.gradient_checkpointing = False

    def requires_grad_(self, requires_grad: bool = True) -> Siglip2VisionTower:
        """Sets ``requires_grad`` of the tower's parameters; the unread pooling head stays frozen."""
        super().requires_grad_(requires_grad)
        if self.head is not None:
            self.head.requires_grad_(False)
        return self

    def train(self, mode: bool = True) -> Siglip2VisionTower:
        """Training mode for the tower; the unread pooling head stays in eval mode."""
        super().train(mode)
        if self.head is not None:
            self.head.eval()
        return self

    def _rope(self, h: int, w: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
        if not self.config.vision_rope:
            return None
        angles = rope_angles(h, w, self.config.vision_head_dim, float(self.config.vision_window_size), device)
        return torch.cos(angles), torch.sin(angles)

    def _mask(self, h: int, w: int, device: torch.device) -> torch.Tensor | None:
        if not any(self.windowed):
            return None
        ids = window_ids(h, w, self.config.vision_window_size, device)
        return ids[:, None] == ids[None, :]

    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        """Normalized images of one size [N, 3, H, W] -> tokens [N, h * w, C] after post_layernorm (raster order)."""
        patch = self.config.vision_patch_size
        n, h, w = pixels.shape[0], pixels.shape[-2] // patch, pixels.shape[-1] // patch
        grids = torch.tensor([[h, w]] * n, device=pixels.device)
        hidden = self.embeddings(patchify(pixels, patch), grids)
        rope, mask = self._rope(h, w, hidden.device), self._mask(h, w, hidden.device)
        for layer, windowed in zip(self.encoder.layers, self.windowed, strict=True):
            layer_mask = mask if windowed else None
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                hidden = checkpoint(layer, hidden, rope, layer_mask, use_reentrant=False)
            else:
                hidden = layer(hidden, rope, layer_mask)
        return self.post_layernorm(hidden)

    def forward(self, images: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Normalized images ([3, H, W] each, sizes may differ) -> per image tokens [h * w, C] (raster order);
        images of one size run together."""
        groups: dict[tuple[int, int], list[int]] = {}
        for index, image in enumerate(images):
            groups.setdefault(tuple(image.shape[-2:]), []).append(index)
        out: list[torch.Tensor | None] = [None] * len(images)
        for indices in groups.values():
            tokens = self.encode(torch.stack([images[i] for i in indices]))
            for i, t in zip(indices, tokens, strict=True):
                out[i] = t
        return out  # type: ignore[return-value]
