"""Flow-matching schedule and the noisy/clean training streams of LingBot-VA.

Every random quantity is drawn from a ``torch.Generator`` passed in (the model's own, which the trainer
seeds and checkpoints); nothing touches the global RNG. Draws happen on the CPU: they are small except the
noise, and keeping them on the CPU makes the scalar draws (coins, chunk and window sizes) host values
without a device sync, and makes a CPU run and a GPU run draw identical numbers.

The draw order is the reference's (lerobot ``LingBotVAPolicy.training_loss_from_streams``), so a generator
seeded like the reference's global RNG replays its draws exactly: video ``rand(F)``, video noise, video
coin ``rand(1)`` (+ conditioning ``rand(F)`` and noise when taken), action ``rand(F)``, action noise,
action coin, ``randint(1, 5)`` chunk size, ``randint(4, 65)`` window size; then (ours) the per-sample text
dropout coins. The schedule itself (:class:`FlowMatchSchedule`, :func:`sigma_schedule`) is the shared
:mod:`embodied_models.wan.flow`.
"""

from __future__ import annotations

import attrs
import torch

from embodied_models.wan.flow import FlowMatchSchedule, sigma_schedule

__all__ = ["FlowMatchSchedule", "StreamDraw", "draw_mask_params", "draw_stream", "sigma_schedule"]


@attrs.define
class StreamDraw:
    """One stream after noising. Tensors are on the data's device; timesteps are [B, F] (0..1000)."""

    noisy: torch.Tensor
    clean: torch.Tensor
    target: torch.Tensor
    timesteps: torch.Tensor
    clean_timesteps: torch.Tensor
    weight: torch.Tensor
    """Per-(element, frame) loss weight [B, F]."""
    ids: torch.Tensor
    """Schedule ids of the noisy stream [F] (CPU)."""
    cond_ids: torch.Tensor | None = None
    """Schedule ids of the noised conditioning copy [F], or None when the copy stayed clean."""


def _noised(x0: torch.Tensor, noise: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
    # In x0's dtype, as the reference (its sigma is cast to the data dtype before mixing).
    sigma = sigmas.to(device=x0.device, dtype=x0.dtype).view(1, 1, -1, *([1] * (x0.dim() - 3)))
    return (1 - sigma) * x0 + sigma * noise


def draw_stream(x0: torch.Tensor, schedule: FlowMatchSchedule, generator: torch.Generator, *,
                noisy_cond_prob: float, channel_mask: torch.Tensor | None = None) -> StreamDraw:
    """Noises one stream [B, C, F, ...] at per-frame timesteps shared by the batch.

    Args:
        x0: clean data, frames on dim 2.
        schedule: the stream's training schedule.
        generator: a CPU generator; every draw goes through it.
        noisy_cond_prob: probability that the clean conditioning copy is noised at u in [0.5, 1).
        channel_mask: multiplies noisy, clean and target (actions: used channels and valid steps).
    """
    b, num_frames = x0.shape[0], x0.shape[2]
    ids = schedule.ids_from_uniform(torch.rand(num_frames, generator=generator))
    noise = torch.zeros(x0.shape, dtype=x0.dtype).normal_(generator=generator).to(x0.device)
    noisy = _noised(x0, noise, schedule.sigmas[ids])
    target = noise - x0
    clean, cond_ids = x0, None
    clean_t = torch.zeros(num_frames)
    coin = torch.rand(1, generator=generator)
    if float(coin) < noisy_cond_prob:  # a CPU tensor: no device sync
        cond_ids = schedule.ids_from_uniform(torch.rand(num_frames, generator=generator) * 0.5 + 0.5)
        cond_noise = torch.zeros(x0.shape, dtype=x0.dtype).normal_(generator=generator).to(x0.device)
        clean = _noised(x0, cond_noise, schedule.sigmas[cond_ids])
        clean_t = schedule.timesteps[cond_ids]
    if channel_mask is not None:
        mask = channel_mask.float()
        noisy, clean, target = noisy * mask, clean * mask, target * mask
    device = x0.device
    return StreamDraw(noisy=noisy, clean=clean, target=target,
                      timesteps=schedule.timesteps[ids].to(device).expand(b, -1),
                      clean_timesteps=clean_t.to(device).expand(b, -1),
                      weight=schedule.weights[ids].to(device).expand(b, -1), ids=ids, cond_ids=cond_ids)


def draw_mask_params(generator: torch.Generator, *, chunk_size_range: tuple[int, int],
                     window_size_range: tuple[int, int]) -> tuple[int, int]:
    """(chunk_size, window_size) drawn uniformly from their inclusive ranges."""
    chunk = torch.randint(chunk_size_range[0], chunk_size_range[1] + 1, (1,), generator=generator)
    window = torch.randint(window_size_range[0], window_size_range[1] + 1, (1,), generator=generator)
    return int(chunk), int(window)
