"""Rectified flow of Cosmos3: time distributions, the shift, per-sample training draws and the sampling schedule.

Convention (LoongForge's / Cosmos's): sigma = 1 is noise, ``x_sigma = sigma * noise + (1 - sigma) * x0``, the
network predicts the velocity ``noise - x0``, and the timestep it sees is ``1000 * sigma``. A raw time ``t`` in
[0, 1] is drawn (``waver``: ``1 - u - 1.29 * (cos(pi u / 2)^2 - 1 + u)`` for uniform ``u``; ``uniform``;
``logitnormal``), inverted and shifted: ``sigma = shift * s / (1 + (shift - 1) * s)`` with ``s = 1 - t``.

Training draws go through the torch RNG the trainer seeds: each forward takes one 62-bit key from it (the same
on every rank unless ``--set-seed-by-rank``), and each sample draws its time and noise from a generator seeded
with (key, the sample's dataset index). A sample's draws therefore do not depend on which rank or batch position
it landed in: two processes with half the batch each draw what one process with the whole batch draws.
"""

from __future__ import annotations

import hashlib
import math

import torch

__all__ = ["draw_step_key", "sample_generator", "sampling_sigmas", "shift_sigma", "train_time"]

_WAVER_MODE = 1.29


def shift_sigma(s: torch.Tensor, shift: float) -> torch.Tensor:
    """``shift * s / (1 + (shift - 1) * s)`` (s = 1 - t; sigma = 1 is noise)."""
    return shift * s / (1.0 + (shift - 1.0) * s)


def train_time(distribution: str, generator: torch.Generator) -> torch.Tensor:
    """One raw flow time in [0, 1] (float32 scalar) from ``generator``."""
    if distribution == "waver":
        u = torch.rand((), generator=generator)
        return 1.0 - u - _WAVER_MODE * (torch.cos(math.pi / 2.0 * u) ** 2 - 1.0 + u)
    if distribution == "uniform":
        return torch.rand((), generator=generator)
    if distribution == "logitnormal":
        return torch.sigmoid(torch.randn((), generator=generator))
    raise ValueError(f"model.train_time_distribution {distribution!r}: expected waver, uniform or logitnormal")


def draw_step_key() -> int:
    """One key per training forward, from torch's default CPU RNG (seeded by the trainer)."""
    return int(torch.randint(0, 2**62, (1,)).item())


def sample_generator(step_key: int, sample_key: int) -> torch.Generator:
    """A CPU generator seeded from (step key, sample key) by a hash, so nearby keys give unrelated streams."""
    digest = hashlib.blake2b(f"{step_key}:{sample_key}".encode(), digest_size=8).digest()
    generator = torch.Generator()
    generator.manual_seed(int.from_bytes(digest, "little") & ((1 << 63) - 1))
    return generator


def sampling_sigmas(num_steps: int, shift: float) -> torch.Tensor:
    """``num_steps + 1`` decreasing sigmas from 1 to 0, shifted as in training (float64)."""
    s = torch.linspace(1.0, 0.0, num_steps + 1, dtype=torch.float64)
    return shift_sigma(s, shift)
