"""The Wan2.2 VAE (diffusers ``AutoencoderKLWan``): loading from a local folder, clip preparation, latent
normalization, and a tiny random configuration for tests.

Latents are standardized per channel as ``(mu - latents_mean) / latents_std`` (the config's lists), the
convention of Wan2.2 TI2V and its derivatives. The Wan2.2 VAE compresses 4x in time (``1 + 4k`` frames ->
``1 + k`` latent frames) and ``scale_factor_spatial`` (16) in space.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.nn import functional

from embodied_core.errors import UsageError

__all__ = ["TINY_VAE_CONFIG", "build_tiny_vae", "encode_video", "load_vae", "normalize_latents", "num_latent_frames",
           "prepare_clip"]

TINY_VAE_CONFIG: dict[str, Any] = {
    "base_dim": 8, "z_dim": 8, "dim_mult": [1, 2, 2, 2], "num_res_blocks": 1,
    "temperal_downsample": [False, True, True], "is_residual": True, "in_channels": 12, "out_channels": 12,
    "patch_size": 2, "scale_factor_spatial": 16, "latents_mean": [0.1] * 8, "latents_std": [2.0] * 8,
}
"""A Wan2.2-shaped VAE (patch 2, 16x spatial, 4x temporal) with z_dim 8 and 8 base channels, for tests."""


def build_tiny_vae(seed: int = 0) -> Any:
    """A randomly initialized ``AutoencoderKLWan`` of :data:`TINY_VAE_CONFIG` (eval mode, float32)."""
    from diffusers import AutoencoderKLWan

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoencoderKLWan(**TINY_VAE_CONFIG).eval()


def load_vae(folder: str | Path, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> Any:
    """``AutoencoderKLWan`` from a local diffusers folder (``config.json`` + weights), eval mode, frozen."""
    from diffusers import AutoencoderKLWan

    path = Path(folder)
    if not (path / "config.json").is_file():
        raise UsageError(f"{path}: not a diffusers AutoencoderKLWan folder (config.json missing); expected the vae/ "
                         "folder of Wan2.2-TI2V-5B-Diffusers")
    vae = AutoencoderKLWan.from_pretrained(str(path), torch_dtype=dtype).to(device).eval()
    return vae.requires_grad_(False)


def num_latent_frames(num_frames: int) -> int:
    """Latent frames of a clip of ``num_frames`` (= 1 + 4k) video frames."""
    return (num_frames - 1) // 4 + 1


def prepare_clip(frames: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """uint8 frames [N, 3, H, W] -> float video [3, N, h, w] in [-1, 1] at ``size`` (bilinear)."""
    x = functional.interpolate(frames.float(), size=size, mode="bilinear", align_corners=False)
    return (x / 127.5 - 1.0).permute(1, 0, 2, 3)


def normalize_latents(mu: torch.Tensor, vae: Any) -> torch.Tensor:
    """(mu - latents_mean) / latents_std per channel, in float32 on mu's device."""
    shape = (1, vae.config.z_dim, 1, 1, 1)
    mean = torch.tensor(vae.config.latents_mean, dtype=torch.float32, device=mu.device).view(shape)
    std = torch.tensor(vae.config.latents_std, dtype=torch.float32, device=mu.device).view(shape)
    return (mu.float() - mean) / std


@torch.no_grad()
def encode_video(vae: Any, video: torch.Tensor) -> torch.Tensor:
    """Video [B, 3, T, H, W] in [-1, 1] -> normalized latents [B, z_dim, (T-1)//4 + 1, H/16, W/16] (float32).

    Uses the posterior mode (no sampling), in the VAE's dtype and on its device.
    """
    param = next(vae.parameters())
    mu = vae.encode(video.to(param.device, param.dtype)).latent_dist.mode()
    return normalize_latents(mu, vae)
