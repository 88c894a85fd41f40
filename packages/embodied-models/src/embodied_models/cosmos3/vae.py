"""The Wan2.2 VAE encoder (diffusers ``AutoencoderKLWan``) that turns Cosmos3's uint8 videos into latents.

Only the encoder half is kept (the model predicts actions; nothing decodes video), so the module holds
``encoder.*`` and ``quant_conv.*``. It is built from the ``model.vae_*`` fields, or from the ``config.json`` of a
local diffusers folder (``model.vae_path``) whose encoder weights :func:`load_vae_weights` then copies in.
Encoding: frames scaled to [-1, 1], the posterior mean (no sampling), normalized per channel with the latent
statistics, without autocast (the Wan VAE runs in its own precision), cropped to the frame content
(``image_size``'s content height/width over the spatial compression), as LoongForge's training does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from embodied_core.checkpoint.keymap import Allow, KeyMap, LoadReport, load_state
from embodied_core.checkpoint.pretrained import resolve_weights
from embodied_core.errors import CheckpointError
from embodied_models.cosmos3.config import Cosmos3ModelConfig

__all__ = ["DECODER_KEYS", "build_vae", "encode_videos", "latent_statistics", "load_vae_weights", "vae_folder_config"]

DECODER_KEYS = ("decoder.*", "post_quant_conv.*")
"""Keys of a full diffusers VAE checkpoint that the encoder-only module drops on purpose."""


def vae_folder_config(path: str | Path) -> dict[str, Any]:
    """The ``config.json`` of a local diffusers ``AutoencoderKLWan`` folder (CheckpointError naming what is wrong)."""
    file = Path(path) / "config.json"
    if not file.is_file():
        raise CheckpointError(f"model.vae_path {path}: no config.json there; give a local diffusers AutoencoderKLWan "
                              "folder (e.g. Wan2.2-TI2V-5B-Diffusers/vae)")
    try:
        return json.loads(file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"model.vae_path {file}: unreadable ({exc})") from None


def _vae_kwargs(config: Cosmos3ModelConfig) -> dict[str, Any]:
    if config.vae_path is not None:
        folder = vae_folder_config(config.vae_path)
        keys = ("base_dim", "z_dim", "dim_mult", "num_res_blocks", "attn_scales", "temperal_downsample",
                "is_residual", "in_channels", "out_channels", "patch_size", "scale_factor_temporal",
                "scale_factor_spatial", "latents_mean", "latents_std", "decoder_base_dim")
        return {k: folder[k] for k in keys if k in folder}
    channels = 3 * config.vae_patch_size ** 2
    return dict(base_dim=config.vae_base_dim, z_dim=config.latent_channel, dim_mult=list(config.vae_dim_mult),
                num_res_blocks=config.vae_num_res_blocks, temperal_downsample=list(config.vae_temporal_downsample),
                is_residual=True, in_channels=channels, out_channels=channels, patch_size=config.vae_patch_size,
                scale_factor_temporal=config.vae_temporal_compression,
                scale_factor_spatial=config.vae_spatial_compression,
                latents_mean=list(config.vae_latents_mean or []), latents_std=list(config.vae_latents_std or []))


def build_vae(config: Cosmos3ModelConfig) -> nn.Module:
    """An encoder-only ``AutoencoderKLWan`` (random weights) of the configured (or ``vae_path``'s) architecture."""
    from diffusers import AutoencoderKLWan

    vae = AutoencoderKLWan(**_vae_kwargs(config))
    if vae.config.z_dim != config.latent_channel:
        raise CheckpointError(f"model.vae_path {config.vae_path}: z_dim {vae.config.z_dim} but model.latent_channel "
                              f"is {config.latent_channel}")
    del vae.decoder, vae.post_quant_conv  # encode() never reaches them
    vae.requires_grad_(False)
    return vae


def latent_statistics(config: Cosmos3ModelConfig) -> tuple[list[float], list[float]]:
    """(mean, std) per latent channel: the config's values, else those of ``vae_path``'s config."""
    mean, std = config.vae_latents_mean, config.vae_latents_std
    if (mean is None or std is None) and config.vae_path is not None:
        folder = vae_folder_config(config.vae_path)
        mean = mean if mean is not None else folder.get("latents_mean")
        std = std if std is not None else folder.get("latents_std")
    if mean is None or std is None or len(mean) != config.latent_channel or len(std) != config.latent_channel:
        raise CheckpointError(f"Cosmos3 VAE latent statistics: need {config.latent_channel} values each of "
                              "model.vae_latents_mean / model.vae_latents_std (or latents_mean / latents_std in "
                              f"model.vae_path's config.json); got {mean!r} / {std!r}")
    return [float(x) for x in mean], [float(x) for x in std]


def load_vae_weights(vae: nn.Module, path: str | Path) -> LoadReport:
    """Copies a diffusers VAE folder's encoder weights into ``vae`` (strict; the decoder's keys are ignored)."""
    weights = resolve_weights(Path(path))
    keymap = KeyMap(ignored=DECODER_KEYS)
    return load_state(vae, weights.items(), keymap, source=f"Wan2.2 VAE {weights}", allow=Allow())


@torch.no_grad()
def encode_videos(vae: nn.Module, videos: Sequence[torch.Tensor], content_hw: Sequence[tuple[int, int]],
                  mean: Sequence[float], std: Sequence[float], *, content_only: bool = False) -> list[torch.Tensor]:
    """uint8 videos ``[3, T, H, W]`` -> normalized latents ``[C, T', h, w]`` (float32), cropped to the content.

    ``content_hw[i]`` is the (height, width) of video i's content before its bottom/right padding; the latent keeps
    ``max(1, side // spatial_compression)`` rows/columns of it. ``content_only``: the video is first cropped to the
    content rounded up to whole latent pixels. Videos of one shape are encoded in one call.
    """
    param = next(vae.parameters())
    factor = int(vae.config.scale_factor_spatial)
    if content_only:
        def whole(side: int, limit: int) -> int:
            return min(limit, -(-int(side) // factor) * factor)

        videos = [v[:, :, : whole(h, v.shape[2]), : whole(w, v.shape[3])]
                  for v, (h, w) in zip(videos, content_hw, strict=True)]
    shape = (1, len(mean), 1, 1, 1)
    mean_t = torch.tensor(mean, dtype=torch.float32, device=param.device).view(shape)
    std_t = torch.tensor(std, dtype=torch.float32, device=param.device).view(shape)
    out: list[torch.Tensor | None] = [None] * len(videos)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, video in enumerate(videos):
        groups.setdefault(tuple(video.shape), []).append(i)
    with torch.autocast(device_type=param.device.type, enabled=False):
        for indices in groups.values():
            x = torch.stack([videos[i] for i in indices]).to(device=param.device, dtype=param.dtype)
            x = x / 127.5 - 1.0
            mu = vae.encode(x).latent_dist.mode()
            latents = (mu.float() - mean_t) / std_t
            for j, i in enumerate(indices):
                h, w = (max(1, int(side) // factor) for side in content_hw[i])
                out[i] = latents[j, :, :, :h, :w].contiguous()
    return [x for x in out if x is not None]
