"""Patch embedding and unpatchify of Wan video latents.

Wan embeds (pt, ph, pw) patches with a Conv3d (kernel = stride = patch), so a token's input features are
ordered (c, pt, ph, pw) and tokens are ordered (f, h, w) row-major. The output head emits pt*ph*pw*C features
per token ordered (pt, ph, pw, c) - the opposite order; :func:`unpatchify` puts token (f, h, w) feature
(p, q, r, c) at ``[c, f*pt + p, h*ph + q, w*pw + r]``.

Legend: B batch, C channels, F/H/W latent grid, f/h/w token grid, P = pt*ph*pw.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["conv3d_weight_to_linear", "linear_weight_to_conv3d", "patchify", "token_grid", "unpatchify"]


def token_grid(shape: Sequence[int], patch: Sequence[int]) -> tuple[int, int, int]:
    """Token grid (f, h, w) of a latent grid (F, H, W) cut into ``patch`` = (pt, ph, pw)."""
    (num_f, num_h, num_w), (pt, ph, pw) = tuple(shape)[-3:], tuple(patch)
    if num_f % pt or num_h % ph or num_w % pw:
        raise ValueError(f"latent grid {(num_f, num_h, num_w)} is not divisible by the patch size {(pt, ph, pw)}")
    return num_f // pt, num_h // ph, num_w // pw


def patchify(latents: torch.Tensor, patch: Sequence[int]) -> torch.Tensor:
    """[B, C, F, H, W] -> [B, f*h*w, C*P] with features ordered (c, pt, ph, pw) like Conv3d weights."""
    pt, ph, pw = patch
    b, c = latents.shape[:2]
    f, h, w = token_grid(latents.shape, patch)
    x = latents.reshape(b, c, f, pt, h, ph, w, pw).permute(0, 2, 4, 6, 1, 3, 5, 7)
    return x.reshape(b, f * h * w, c * pt * ph * pw)


def unpatchify(tokens: torch.Tensor, grid: Sequence[int], patch: Sequence[int]) -> torch.Tensor:
    """Head output [B, f*h*w, P*C] (features (pt, ph, pw, c)) or rows [B, f*h*w*P, C] -> [B, C, F, H, W]."""
    (f, h, w), (pt, ph, pw) = tuple(grid), tuple(patch)
    b = tokens.shape[0]
    x = tokens.reshape(b, f, h, w, pt, ph, pw, -1).permute(0, 7, 1, 4, 2, 5, 3, 6)
    return x.reshape(b, -1, f * pt, h * ph, w * pw)


def conv3d_weight_to_linear(weight: torch.Tensor) -> torch.Tensor:
    """Conv3d patch-embedding weight [D, C, pt, ph, pw] -> the equivalent Linear weight [D, C*P]."""
    return weight.reshape(weight.shape[0], -1)


def linear_weight_to_conv3d(weight: torch.Tensor, in_channels: int, patch: Sequence[int]) -> torch.Tensor:
    """Linear patch-embedding weight [D, C*P] -> the Conv3d weight [D, C, pt, ph, pw]."""
    return weight.reshape(weight.shape[0], in_channels, *patch)
