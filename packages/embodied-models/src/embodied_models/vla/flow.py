"""The flow pieces of the pi0-style ports (pi05, smolvla): the sin-cos time embedding and Euler sampling.

Both follow openpi: t = 1 is noise, the network predicts the velocity ``noise - actions`` and sampling integrates
from t = 1 to 0 in equal steps. X-VLA (re-noising toward the same noise each step) and GR00T N1.7 (t = 1 is data,
bucketed times) sample differently and keep their own loops. How the training time is drawn stays in each port:
pi05 and smolvla build the Beta distribution on different devices, so their random streams differ, and the goldens
match each reference's stream.
"""

# ruff: noqa: N803 - shape-suffixed tensor names (time_B: one time per sample of the batch)

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["PrefixCachedFlow", "euler_sample", "flow_loss_elements", "time_sincos"]


def time_sincos(time_B: torch.Tensor, width: int, *, min_period: float, max_period: float) -> torch.Tensor:
    """Sin-cos embedding of the flow time, ``[sin | cos]`` of ``2 pi t / period`` with periods geometric in
    [min, max]; float64 math, returned as float64 (the caller casts once, to its layer's dtype)."""
    if width % 2:
        raise ValueError(f"time embedding width must be even (got {width})")
    fraction = torch.linspace(0.0, 1.0, width // 2, dtype=torch.float64, device=time_B.device)
    period = min_period * (max_period / min_period) ** fraction
    angle = time_B[:, None] * (1.0 / period * 2 * math.pi)[None, :]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)


def euler_sample(velocity: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], noise: torch.Tensor,
                 num_steps: int) -> torch.Tensor:
    """Integrates ``dx/dt = velocity(x_t, t)`` from t = 1 (``noise``) to t = 0 in ``num_steps`` Euler steps.

    Args:
        velocity: ``(x_t [B, ...] float32, t [B] float32) -> v [B, ...]``.
        noise: x at t = 1.
        num_steps: Euler steps (t = 1, 1 - 1/n, ..., 1/n are evaluated).

    Returns:
        float32 x at t = 0.
    """
    b = noise.shape[0]
    dt = -1.0 / num_steps
    x_t = noise.float()
    for step in range(num_steps):
        time = torch.full((b,), 1.0 + step * dt, dtype=torch.float32, device=noise.device)
        x_t = x_t + dt * velocity(x_t, time)
    return x_t


def flow_loss_elements(actions: torch.Tensor, *, noise: torch.Tensor | None, time: torch.Tensor | None,
                       draw: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
                       velocity: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Per-element flow-matching loss ``(u_t - v_t)^2`` (no reduction) of actions [B, H, A].

    ``x_t = t noise + (1 - t) actions`` and the target ``u_t = noise - actions``; ``noise`` / ``time`` not given
    are drawn with ``draw(actions) -> (noise, time)`` (the port's own stream); ``velocity(x_t, time)`` is the
    network's prediction.
    """
    if noise is None or time is None:
        drawn_noise, drawn_time = draw(actions)
        noise = drawn_noise if noise is None else noise
        time = drawn_time if time is None else time
    t = time[:, None, None]
    x_t = t * noise + (1 - t) * actions
    u_t = noise - actions
    return F.mse_loss(u_t, velocity(x_t, time), reduction="none")


class PrefixCachedFlow:
    """The training loss elements and the sampler of a pi0-style policy (mix in before ``EmbodiedModel``).

    The port provides ``config.num_inference_steps`` / ``config.max_action_dim``, ``action_horizon``,
    ``embed_prefix(batch)``, ``velocity(prefix, x_t, t)`` (the joint training pass), ``sample_noise_and_time(actions)``
    (its own random stream), ``fill_prefix_cache(batch) -> (cache, prefix_pad)`` and
    ``cached_velocity(cache, prefix_pad, x_t, t)`` (the expert alone, reading the prefix cache).
    """

    def loss_elements(self, batch: Any, *, noise: torch.Tensor | None = None,
                      time: torch.Tensor | None = None) -> torch.Tensor:
        """Per-element flow-matching loss ``(u_t - v_t)^2`` [B, H, max_action_dim] (no reduction); ``noise`` and
        ``time`` not given are drawn from the model's stream."""
        if batch.actions is None:
            raise ValueError("the batch has no actions; training needs them (inference: sample_actions)")
        return flow_loss_elements(batch.actions.float(), noise=noise, time=time, draw=self.sample_noise_and_time,
                                  velocity=lambda x_t, t: self.velocity(self.embed_prefix(batch), x_t, t))

    @torch.no_grad()
    def sample_actions(self, batch: Any, noise: torch.Tensor | None = None,
                       num_steps: int | None = None) -> torch.Tensor:
        """Euler integration of the flow from t = 1 (noise) to 0 with the prefix run once; returns
        [B, H, max_action_dim] in the normalized space (the transforms' ``postprocess_actions`` keeps data.action_dim
        dims and unnormalizes them)."""
        num_steps = num_steps or self.config.num_inference_steps
        if noise is None:
            noise = torch.randn(batch.tokens.shape[0], self.action_horizon, self.config.max_action_dim,
                                device=batch.tokens.device)
        cache, prefix_pad = self.fill_prefix_cache(batch)
        return euler_sample(lambda x_t, time: self.cached_velocity(cache, prefix_pad, x_t, time), noise, num_steps)
