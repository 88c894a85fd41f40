"""``tiny_flow_policy``: a small flow-matching policy.

Conditional flow matching with t=1 as noise: ``x_t = t * noise + (1 - t) * actions`` and the network
predicts the velocity ``u = noise - actions``; sampling integrates from t=1 to t=0 with Euler steps.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from embodied_core import ModelOutput
from embodied_plugin_template.config import TinyFlowDataConfig, TinyFlowPolicyConfig


def sinusoidal_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """``[B] -> [B, dim]`` sin/cos embedding of the flow time."""
    half = dim // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    angles = t.float()[:, None] * 1000.0 * freqs[None]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class ImageEncoder(nn.Module):
    """Three stride-2 convolutions and global average pooling: uint8 [B,3,H,W] -> [B, C]."""

    def __init__(self, channels: tuple[int, int, int]) -> None:
        super().__init__()
        c1, c2, c3 = channels
        self.net = nn.Sequential(
            nn.Conv2d(3, c1, 5, stride=2, padding=2), nn.GELU(),
            nn.Conv2d(c1, c2, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(c2, c3, 3, stride=2, padding=1), nn.GELU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)


class TinyFlowPolicy(nn.Module):
    """Observation encoder + MLP velocity field over a flattened action chunk."""

    def __init__(self, config: TinyFlowPolicyConfig, data: TinyFlowDataConfig) -> None:
        super().__init__()
        self.config = config
        self.data = data
        self.encoder = ImageEncoder(config.conv_channels)
        obs_dim = config.conv_channels[-1] * len(data.camera_keys) + data.state_dim
        chunk = data.action_horizon * data.action_dim
        self.head = nn.Sequential(
            nn.Linear(obs_dim + chunk + config.time_embed_dim, config.hidden_dim), nn.GELU(),
            nn.Linear(config.hidden_dim, config.hidden_dim), nn.GELU(),
            nn.Linear(config.hidden_dim, chunk),
        )
        self.obs_norm = nn.LayerNorm(obs_dim)

    def encode(self, batch: dict[str, Any]) -> torch.Tensor:
        """Image features of every camera (current frame) and the current state: ``[B, obs_dim]``."""
        features = []
        height, width = self.data.image_size
        for key in self.data.camera_keys:
            images = batch[key]
            if images.dim() == 5:  # [B, T, C, H, W]: use the current (last) frame
                images = images[:, -1]
            images = images.float() / 127.5 - 1.0
            if images.shape[-2:] != (height, width):
                images = F.interpolate(images, size=(height, width), mode="bilinear", align_corners=False)
            features.append(self.encoder(images))
        state = batch[self.data.state_key].float()
        if state.dim() == 3:  # [B, T, D]: current state
            state = state[:, -1]
        return self.obs_norm(torch.cat([*features, state], dim=-1))

    def velocity(self, obs: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Predicted velocity ``[B, H, D]`` at noisy chunk ``x_t`` and time ``t``."""
        inputs = torch.cat([obs, x_t.flatten(1), sinusoidal_embedding(t, self.config.time_embed_dim)], dim=-1)
        return self.head(inputs).view_as(x_t)

    def forward(self, batch: dict[str, Any]) -> ModelOutput:
        """Flow-matching loss over the non-padded actions of the chunk."""
        actions = batch[self.data.action_key].float()
        obs = self.encode(batch)
        noise = torch.randn_like(actions)
        t = torch.rand(actions.shape[0], device=actions.device)
        x_t = t[:, None, None] * noise + (1 - t[:, None, None]) * actions
        error = (self.velocity(obs, x_t, t) - (noise - actions)) ** 2
        pad = batch.get(f"{self.data.action_key}_is_pad")
        weight = (~pad).float()[..., None] if pad is not None else torch.ones_like(error[..., :1])
        loss = (error * weight).sum() / (weight.sum() * actions.shape[-1]).clamp(min=1.0)
        return ModelOutput(loss=loss, metrics={"action_mse": loss.detach()})

    @torch.no_grad()
    def sample_actions(self, batch: dict[str, Any], noise: torch.Tensor | None = None,
                       num_steps: int | None = None) -> torch.Tensor:
        """Integrates the velocity field from noise (t=1) to an action chunk (t=0)."""
        obs = self.encode(batch)
        steps = num_steps or self.config.num_inference_steps
        shape = (obs.shape[0], self.data.action_horizon, self.data.action_dim)
        x = torch.randn(shape, device=obs.device) if noise is None else noise.to(obs.device)
        dt = 1.0 / steps
        for i in range(steps):
            t = torch.full((shape[0],), 1.0 - i * dt, device=obs.device)
            x = x - dt * self.velocity(obs, x, t)
        return x

    def fsdp_units(self) -> list[type[nn.Module]]:
        """Natural FSDP units: the image encoder."""
        return [ImageEncoder]

    def no_weight_decay(self) -> list[str]:
        """Parameter names exempt from weight decay (norms and biases are handled by the trainer)."""
        return []


def build_model(config: TinyFlowPolicyConfig, data: TinyFlowDataConfig) -> TinyFlowPolicy:
    """Factory named by the ``tiny_flow_policy`` spec."""
    return TinyFlowPolicy(config, data)
