"""DreamZero's discrete flow-matching schedule (LoongForge's ``FlowMatchScheduler`` with ``extra_one_step``).

Training: ``sigma_i`` for ids ``i = 0..N-1`` is ``linspace(1, 0, N + 1)[:-1]`` shifted by
``s * sigma / (1 + (s - 1) * sigma)``; timestep ``t_i = 1000 * sigma_i``; the loss weight of id i is the
Gaussian bump ``exp(-2 ((t_i - N/2) / N)^2)`` minus its minimum, scaled to mean 1. Noising:
``x_t = (1 - sigma) x + sigma * noise``, target ``noise - x``.
Inference: ``num_steps`` sigmas ``linspace(1, 0, num_steps + 1)[:-1]`` shifted, Euler steps to sigma 0.
"""

from __future__ import annotations

import torch

__all__ = ["FlowSchedule", "inference_sigmas", "shift_sigmas"]


def shift_sigmas(sigmas: torch.Tensor, shift: float) -> torch.Tensor:
    """``s * sigma / (1 + (s - 1) * sigma)``."""
    return shift * sigmas / (1 + (shift - 1) * sigmas)


def inference_sigmas(num_steps: int, shift: float) -> torch.Tensor:
    """``num_steps + 1`` sigmas from 1 down to 0 (the last one is the clean end)."""
    sigmas = shift_sigmas(torch.linspace(1.0, 0.0, num_steps + 1, dtype=torch.float64, device="cpu")[:-1], shift)
    return torch.cat([sigmas, sigmas.new_zeros(1)]).float()


class FlowSchedule:
    """Training tables by timestep id (float32, built on CPU and moved per device on demand).

    Args:
        num_train_timesteps: N.
        shift: sigma shift.
    """

    def __init__(self, num_train_timesteps: int, shift: float) -> None:
        n = num_train_timesteps
        self.num_train_timesteps = n
        # on the CPU explicitly: a model built under torch.device("meta") (--init-on-meta) still needs real tables
        sigmas = shift_sigmas(torch.linspace(1.0, 0.0, n + 1, device="cpu")[:-1], shift)
        timesteps = sigmas * n
        bump = torch.exp(-2 * ((timesteps - n / 2) / n) ** 2)
        bump = bump - bump.min()
        self._tables = {"sigmas": sigmas, "timesteps": timesteps, "weights": bump * (n / bump.sum())}
        self._on: dict[tuple[str, torch.device], torch.Tensor] = {}

    def lookup(self, name: str, ids: torch.Tensor) -> torch.Tensor:
        """``name`` ('sigmas', 'timesteps', 'weights') at the timestep ids (float32, on ids' device)."""
        key = (name, ids.device)
        if key not in self._on:
            self._on[key] = self._tables[name].to(ids.device)
        return self._on[key][ids]
