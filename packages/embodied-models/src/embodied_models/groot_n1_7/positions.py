"""Qwen3-VL's multimodal RoPE positions of GR00T prompts (torch only; the collate function computes them on the
host, so the forward pass needs no host sync for them)."""

from __future__ import annotations

import torch

__all__ = ["mrope_positions"]


def mrope_positions(attention_mask: torch.Tensor, image_mask: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Qwen3-VL's multimodal RoPE positions [3, B, L] of left- or right-padded prompts.

    Over each sample's valid tokens: a text token advances one position on all three axes; an image (a run of
    ``gh * gw`` merged tokens, ``grid = (gh, gw)``) gets ``(start, start + row, start + col)`` and advances the
    position by ``max(gh, gw)``. Padding positions stay 0 (they are masked out).
    """
    batch, length = attention_mask.shape
    gh, gw = grid
    per_image = gh * gw
    device = attention_mask.device
    rows = torch.arange(gh, device=device).repeat_interleave(gw)
    cols = torch.arange(gw, device=device).repeat(gh)
    out = torch.zeros(3, batch, length, dtype=torch.long, device=device)
    valid_all = attention_mask.bool().cpu()
    image_all = image_mask.bool().cpu()
    for b in range(batch):
        where = valid_all[b].nonzero().flatten()
        is_image = image_all[b][where].tolist()
        pieces: list[torch.Tensor] = []
        current, i, n = 0, 0, len(is_image)
        while i < n:
            j = i
            while j < n and is_image[j] == is_image[i]:
                j += 1
            run = j - i
            if not is_image[i]:
                pieces.append(torch.arange(current, current + run, device=device).expand(3, -1))
                current += run
            else:
                if run % per_image:
                    raise ValueError(f"sample {b}: an image-token run of {run} is not a multiple of the {per_image} "
                                     f"tokens per image (grid {gh}x{gw})")
                for _ in range(run // per_image):
                    pieces.append(torch.stack([torch.full_like(rows, current), current + rows, current + cols]))
                    current += max(gh, gw)
            i = j
        if pieces:
            out[:, b, where.to(device)] = torch.cat(pieces, dim=1)
    return out
