"""Shifted-sigma flow matching of the Wan family (sigma = 1 is pure noise, sigma = 0 is data).

- shift: ``phi(u, s) = s*u / (1 + (s-1)*u)`` maps a uniform u to a sigma concentrated near noise for s > 1;
- noising ``x_t = (1 - sigma) x0 + sigma noise``, velocity target ``noise - x0``, network timestep
  ``1000 * sigma``;
- a discrete training table (:class:`FlowMatchSchedule`: sigmas, timesteps, bell-shaped loss weights, ids from
  uniform draws) and the continuous bell weight (:func:`bell_weight`) of the same shape;
- the sampling schedule (:func:`inference_schedule`): sigmas from 1 down to 0 and the Euler deltas.
"""

from __future__ import annotations

import hashlib

import attrs
import numpy as np
import torch

__all__ = [
    "FlowMatchSchedule",
    "bell_weight",
    "draw_step_key",
    "inference_schedule",
    "noise_to",
    "sample_generator",
    "shift_sigma",
    "sigma_schedule",
    "velocity_target",
]


def shift_sigma(u: torch.Tensor, shift: float) -> torch.Tensor:
    """``s*u / (1 + (s-1)*u)`` elementwise, in u's dtype."""
    return shift * u / (1 + (shift - 1) * u)


def sigma_schedule(shift: float, num_steps: int) -> torch.Tensor:
    """Shifted sigmas for ``u = linspace(1, 0, num_steps + 1)[:-1]`` (float32, CPU)."""
    # Explicitly on the CPU: a model built under ``torch.device("meta")`` still needs real schedule values.
    u = torch.linspace(1.0, 0.0, num_steps + 1, device="cpu")[:-1]
    return shift_sigma(u, shift)


def noise_to(x0: torch.Tensor, noise: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """``(1 - sigma) x0 + sigma noise``; ``sigma`` broadcasts against x0 (shape it like [B, 1, ...])."""
    return (1 - sigma) * x0 + sigma * noise


def velocity_target(x0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The flow-matching regression target ``noise - x0``."""
    return noise - x0


def _bell(t: torch.Tensor, num_steps: int) -> torch.Tensor:
    return torch.exp(-2 * ((t - num_steps / 2) / num_steps) ** 2)


def bell_weight(timesteps: torch.Tensor, shift: float, num_steps: int = 1000) -> torch.Tensor:
    """Loss weight of continuous timesteps (0..num_steps): ``(y(t) - y_min) / (mean_i(y_i - y_min) + 1e-10)``.

    ``y(t) = exp(-2 ((t - N/2) / N)^2)``; ``y_i`` runs over the float64 grid ``N * phi(linspace(1, 0, N+1)[:-1],
    shift)``, whose minimum is ``y_min``. ``y(t)`` itself is computed in float32, as the references do.
    """
    u = torch.linspace(1.0, 0.0, num_steps + 1, dtype=torch.float64)[:-1]
    grid = _bell(num_steps * shift_sigma(u, shift), num_steps)
    y_min = float(grid.min())
    scale = float((grid - y_min).mean()) + 1e-10
    return (_bell(timesteps.float(), num_steps) - y_min) / scale


def inference_schedule(shift: float, num_steps: int, num_train_steps: int = 1000
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Euler sampling schedule: (sigmas [K], timesteps [K] = N * sigma, deltas [K] = sigma_{k+1} - sigma_k).

    ``sigma_k = phi(u_k, shift)`` for ``u = linspace(1, 0, K + 1)[:K]`` in float64, then float32; sigma_K = 0.
    """
    u = torch.from_numpy(np.linspace(1.0, 0.0, num_steps + 1)[:num_steps])
    sigmas = shift_sigma(u, shift).float()
    nxt = torch.cat([sigmas[1:], torch.zeros(1)])
    return sigmas, sigmas * num_train_steps, nxt - sigmas


@attrs.define
class FlowMatchSchedule:
    """The discrete training schedule of one stream: sigmas, timesteps (= N sigma) and loss weights (mean 1)."""

    shift: float
    num_steps: int = 1000
    sigmas: torch.Tensor = attrs.field(init=False)
    timesteps: torch.Tensor = attrs.field(init=False)
    weights: torch.Tensor = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.sigmas = sigma_schedule(self.shift, self.num_steps)
        self.timesteps = self.sigmas * self.num_steps
        # Bell-shaped weight centred on the middle timestep, shifted to start at 0 and rescaled to mean 1.
        shifted = _bell(self.timesteps, self.num_steps)
        shifted = shifted - shifted.min()
        self.weights = shifted * (self.num_steps / shifted.sum())

    def ids_from_uniform(self, u: torch.Tensor) -> torch.Tensor:
        """Schedule ids ``clamp(int(u * num_steps), 0, num_steps - 1)`` for uniform draws u."""
        return (u * self.num_steps).clamp(0, self.num_steps - 1).to(torch.int64)


def draw_step_key() -> int:
    """One 62-bit key per training forward from torch's default CPU RNG (which the trainer seeds alike on every
    rank unless ``--set-seed-by-rank``, and checkpoints)."""
    return int(torch.randint(0, 2**62, (1,)).item())


def sample_generator(step_key: int, sample_key: int) -> torch.Generator:
    """A CPU generator for one sample of one forward, seeded from (step key, the sample's dataset index) by a hash,
    so a sample's draws depend neither on its rank nor on its batch position."""
    digest = hashlib.blake2b(f"{step_key}:{sample_key}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") & ((1 << 63) - 1))
