"""Camera frames -> normalized, tiled Wan2.2 VAE latents (diffusers ``AutoencoderKLWan``).

Shared by ``precompute-latents`` (whole episodes through ``vae.encode``) and by closed-loop inference
(:class:`StreamingVAEEncoder`, chunk by chunk with the causal convolution cache carried over, as the reference's
``WanVAEStreamingWrapper``; encoding frame 0 and then groups of 4k frames equals encoding the whole clip).
Frames are resized (bilinear), scaled to [-1, 1], and latents normalized with ``latents_mean/std``; cameras are
tiled per ``data.camera_layout`` (side by side, or two half-size wrists above the head). Clip preparation and
normalization are the shared :mod:`embodied_models.wan.vae`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from embodied_models.lingbot_va.config import LingBotVADataConfig
from embodied_models.wan.vae import normalize_latents, prepare_clip

__all__ = ["StreamingVAEEncoder", "encode_cameras", "normalize_latents", "prepare_clip"]


def encode_cameras(clips: Sequence[torch.Tensor], data_config: LingBotVADataConfig,
                   encode: Callable[[torch.Tensor, str], torch.Tensor]) -> torch.Tensor:
    """Per-camera uint8 clips [N, 3, H, W] (``data.camera_keys`` order) -> tiled latents [C, L, h, w] (fp32).

    ``encode(video [cams, 3, N, h, w], group)`` returns mu [cams, C, L, h', w']; ``group`` names the resolution
    group (``"full"`` or ``"half"``) so a streaming encoder can keep one cache per group.
    """
    h, w = data_config.image_size
    if data_config.camera_layout == "robotwin_tshape":
        head = encode(torch.stack([prepare_clip(clips[0], (h, w))]), "full")[0]
        left, right = encode(torch.stack([prepare_clip(c, (h // 2, w // 2)) for c in clips[1:]]), "half")
        return torch.cat([torch.cat([left, right], dim=-1), head], dim=-2)
    latents = encode(torch.stack([prepare_clip(c, (h, w)) for c in clips]), "full")
    return torch.cat(list(latents), dim=-1)


class StreamingVAEEncoder:
    """Encodes observations chunk by chunk: first call one frame, then 4k frames per call (per camera).

    Args:
        vae: an ``AutoencoderKLWan`` (eval mode, on ``device`` in ``dtype``).
        data_config: cameras, layout and image size.
    """

    def __init__(self, vae: Any, data_config: LingBotVADataConfig) -> None:
        from diffusers.models.autoencoders.autoencoder_kl_wan import WanCausalConv3d

        self.vae = vae
        self.data_config = data_config
        self.num_convs = sum(isinstance(m, WanCausalConv3d) for m in vae.encoder.modules())
        self.reset()

    def reset(self) -> None:
        """Forgets the causal cache (a new episode)."""
        self.caches: dict[str, list[Any]] = {}

    def _encode(self, video: torch.Tensor, group: str) -> torch.Tensor:
        from diffusers.models.autoencoders.autoencoder_kl_wan import patchify

        param = next(self.vae.parameters())
        x = video.to(param.device, param.dtype)
        if self.vae.config.patch_size is not None:
            x = patchify(x, patch_size=self.vae.config.patch_size)
        cache = self.caches.setdefault(group, [None] * self.num_convs)
        out = self.vae.quant_conv(self.vae.encoder(x, feat_cache=cache, feat_idx=[0]))
        return normalize_latents(out[:, : self.vae.config.z_dim], self.vae)

    @torch.no_grad()
    def __call__(self, clips: Sequence[torch.Tensor]) -> torch.Tensor:
        """uint8 clips [N, 3, H, W] per camera -> latents [1, C, L, h, w] of this chunk (mirrored before resizing
        with ``data.image_hflip``, as the reference)."""
        if self.data_config.image_hflip:
            clips = [clip.flip(-1) for clip in clips]
        return encode_cameras(clips, self.data_config, self._encode).unsqueeze(0)
