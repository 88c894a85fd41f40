"""GR00T's per-embodiment layers (N1.6 and N1.7): category-specific linear layers and MLPs, the multi-embodiment
action encoder with its sin-cos time features, and the masked flow-matching loss.

Ports of the computation of lerobot 0.6.1 ``policies/groot/action_head/`` (N1.7) and LoongForge
``groot_n1_6/modules/embodiment_mlp.py`` (N1.6), which agree. Parameter names (``W``, ``b``, ``layer1``, ``W1``...)
are the checkpoints' own.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CategorySpecificLinear", "CategorySpecificMLP", "MultiEmbodimentActionEncoder", "masked_flow_loss",
           "time_features"]


class CategorySpecificLinear(nn.Module):
    """``y = x @ W[e] + b[e]`` per sample; ``W`` is stored ``[num_embodiments, in, out]`` (transposed relative to
    ``nn.Linear``), as in the checkpoints."""

    def __init__(self, num_embodiments: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.W = nn.Parameter(0.02 * torch.randn(num_embodiments, in_dim, out_dim))
        self.b = nn.Parameter(torch.zeros(num_embodiments, out_dim))

    def forward(self, x: torch.Tensor, embodiment_id: torch.Tensor) -> torch.Tensor:
        """``x`` [B, T, in], ``embodiment_id`` int64 [B] -> [B, T, out]."""
        return torch.bmm(x, self.W[embodiment_id]) + self.b[embodiment_id].unsqueeze(1)


class CategorySpecificMLP(nn.Module):
    """Two category-specific layers with a ReLU between them (state encoder, action decoder)."""

    def __init__(self, num_embodiments: int, in_dim: int, hidden_dim: int, out_dim: int) -> None:
        super().__init__()
        self.layer1 = CategorySpecificLinear(num_embodiments, in_dim, hidden_dim)
        self.layer2 = CategorySpecificLinear(num_embodiments, hidden_dim, out_dim)

    def forward(self, x: torch.Tensor, embodiment_id: torch.Tensor) -> torch.Tensor:
        return self.layer2(F.relu(self.layer1(x, embodiment_id)), embodiment_id)


def time_features(buckets: torch.Tensor, width: int) -> torch.Tensor:
    """``[sin(bucket f_k) | cos(bucket f_k)]`` (sin first), ``f_k = exp(-k ln(10000) / (width / 2))``.

    ``buckets`` [B, T] -> [B, T, width], float32, with the reference's operation order (the log of 10000 is a
    float32 tensor), so that it matches to the last bit at buckets up to 1000.
    """
    half = width // 2
    exponent = -torch.arange(half, dtype=torch.float32, device=buckets.device) * (
        torch.log(torch.tensor(10000.0)) / half)
    freqs = buckets.float().unsqueeze(-1) * exponent.exp()
    return torch.cat([torch.sin(freqs), torch.cos(freqs)], dim=-1)


def _swish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


class MultiEmbodimentActionEncoder(nn.Module):
    """``W3(swish(W2([W1(x_t) | time_features(bucket)])))``, all category-specific."""

    def __init__(self, action_dim: int, width: int, num_embodiments: int) -> None:
        super().__init__()
        self.width = width
        self.W1 = CategorySpecificLinear(num_embodiments, action_dim, width)
        self.W2 = CategorySpecificLinear(num_embodiments, 2 * width, width)
        self.W3 = CategorySpecificLinear(num_embodiments, width, width)

    def forward(self, actions: torch.Tensor, buckets: torch.Tensor, embodiment_id: torch.Tensor) -> torch.Tensor:
        """``actions`` [B, H, A], ``buckets`` int64 [B] -> [B, H, D]."""
        embedded = self.W1(actions, embodiment_id)
        times = time_features(buckets[:, None].expand(-1, actions.shape[1]), self.width).to(embedded.dtype)
        return self.W3(_swish(self.W2(torch.cat([embedded, times], dim=-1), embodiment_id)), embodiment_id)


def masked_flow_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sum((pred - target)^2 mask) / (sum(mask) + 1e-6), per-element masked loss)`` in float32."""
    elements = F.mse_loss(pred.float(), target.float(), reduction="none") * mask.float()
    return elements.sum() / (mask.float().sum() + 1e-6), elements
