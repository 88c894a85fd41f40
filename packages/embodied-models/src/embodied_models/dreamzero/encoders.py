"""The frozen encoders of DreamZero's online path: Wan VAE, UMT5 text encoder and CLIP image encoder.

Shaped by the ``config.json`` of a local folder (``model.vae_path`` / ``text_encoder_path`` /
``image_encoder_path``, diffusers / transformers layouts) or, when a path is unset, by a config (random weights:
tiny presets, meta-device counts); the folders' weights are streamed in by :func:`load_encoder_weights` after the
model is built (right away, or after ``--init-on-meta`` materialized the shards). Nothing is fetched from a hub.
All three are frozen and kept in eval mode.

- VAE: ``AutoencoderKLWan`` posterior mode, latents standardized per channel (``embodied_models.wan.vae``).
- Text: ``UMT5EncoderModel`` last hidden state of the strategy's token ids.
- Image: ``CLIPVisionModel`` penultimate hidden state of the first frame (Wan's ``use_31_block``), resized to the
  encoder's ``image_size`` (bicubic) and normalized with CLIP's mean/std.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from embodied_core.errors import CheckpointError
from embodied_models.dreamzero.config import DreamZeroModelConfig
from embodied_models.wan.vae import normalize_latents

__all__ = ["CLIP_MEAN", "CLIP_STD", "FrozenEncoders", "default_image_config", "default_text_config",
           "default_vae_config", "encoder_paths", "load_encoder_weights"]

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def default_vae_config(model_type: str) -> dict[str, Any]:
    """``AutoencoderKLWan`` arguments of the Wan2.2 (ti2v, z 48) or Wan2.1 (i2v, z 16) VAE (random statistics)."""
    if model_type == "ti2v":
        return {"base_dim": 160, "decoder_base_dim": 256, "z_dim": 48, "dim_mult": [1, 2, 4, 4], "num_res_blocks": 2,
                "temperal_downsample": [False, True, True], "is_residual": True, "in_channels": 12,
                "out_channels": 12, "patch_size": 2, "scale_factor_spatial": 16, "latents_mean": [0.0] * 48,
                "latents_std": [1.0] * 48}
    return {"base_dim": 96, "z_dim": 16}


def default_text_config() -> dict[str, Any]:
    """``UMT5Config`` of UMT5-XXL's encoder."""
    return {"vocab_size": 256384, "d_model": 4096, "d_kv": 64, "d_ff": 10240, "num_layers": 24, "num_heads": 64,
            "feed_forward_proj": "gated-gelu", "relative_attention_num_buckets": 32,
            "relative_attention_max_distance": 128}


def default_image_config() -> dict[str, Any]:
    """``CLIPVisionConfig`` of open-clip ViT-H/14 (Wan2.1's image encoder)."""
    return {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_attention_heads": 16,
            "patch_size": 14, "image_size": 224, "hidden_act": "gelu", "projection_dim": 1024}


def _build_vae(cfg: DreamZeroModelConfig) -> nn.Module:
    from diffusers import AutoencoderKLWan

    if cfg.vae_path:
        return AutoencoderKLWan.from_config(AutoencoderKLWan.load_config(cfg.vae_path))
    return AutoencoderKLWan(**(cfg.vae_config or default_vae_config(cfg.model_type)))


def _build_text(cfg: DreamZeroModelConfig) -> nn.Module:
    from transformers import UMT5Config, UMT5EncoderModel

    if cfg.text_encoder_path:
        return UMT5EncoderModel(UMT5Config.from_pretrained(cfg.text_encoder_path))
    return UMT5EncoderModel(UMT5Config(**(cfg.text_encoder_config or default_text_config())))


def _build_image(cfg: DreamZeroModelConfig) -> nn.Module:
    from transformers import CLIPVisionConfig, CLIPVisionModel

    if cfg.image_encoder_path:
        return CLIPVisionModel(CLIPVisionConfig.from_pretrained(cfg.image_encoder_path))
    return CLIPVisionModel(CLIPVisionConfig(**(cfg.image_encoder_config or default_image_config())))


_WEIGHT_FILES = ("diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model.safetensors",
                 "model.safetensors.index.json", "model.safetensors")
_IGNORED = {"image": ("visual_projection.*", "text_model.*", "text_projection.*", "logit_scale"),
            "text": ("decoder.*", "lm_head.*"), "vae": ()}


def encoder_paths(cfg: DreamZeroModelConfig) -> dict[str, str]:
    """``{"vae" | "text" | "image": folder}`` of the encoders loaded from local folders."""
    paths = {"vae": cfg.vae_path, "text": cfg.text_encoder_path, "image": cfg.image_encoder_path}
    if not cfg.online_encoders:
        paths.pop("vae"), paths.pop("text")
    return {name: path for name, path in paths.items() if path}


def _with_tied_embedding(items: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
    """UMT5 ties ``encoder.embed_tokens`` to ``shared`` (files hold ``shared.weight`` only); both names get it, so
    the tie survives a model materialized from the meta device (where the two are separate tensors)."""
    for key, tensor in items:
        yield key, tensor
        if key == "shared.weight":
            yield "encoder.embed_tokens.weight", tensor


def load_encoder_weights(encoders: nn.Module, cfg: DreamZeroModelConfig) -> list[str]:
    """Streams each encoder's folder (safetensors, a tensor at a time; only local shards under FSDP) into
    ``encoders``; strict apart from the heads an encoder-only module lacks. Returns the folders read."""
    from embodied_core.checkpoint.keymap import KeyMap, load_state
    from embodied_core.checkpoint.pretrained import resolve_weights

    done = []
    for name, folder in encoder_paths(cfg).items():
        path = Path(folder)
        found = next((path / f for f in _WEIGHT_FILES if (path / f).is_file()), None)
        if found is None:
            raise CheckpointError(f"model.{'vae' if name == 'vae' else name + '_encoder'}_path={folder}: no "
                                  f"{' / '.join(_WEIGHT_FILES)} there")
        source = resolve_weights(found)
        items = _with_tied_embedding(source.items()) if name == "text" else source.items()
        load_state(getattr(encoders, name), items, KeyMap(ignored=_IGNORED[name]), source=found)
        done.append(str(found))
    return done


class FrozenEncoders(nn.Module):
    """VAE, text and image encoders (frozen, eval mode).

    Args:
        cfg: the ``model:`` section.
        with_vae_and_text: build the VAE and UMT5 (``model.online_encoders``); the image encoder is always built.
    """

    def __init__(self, cfg: DreamZeroModelConfig, *, with_vae_and_text: bool) -> None:
        super().__init__()
        self.vae = _build_vae(cfg) if with_vae_and_text else None
        self.text = _build_text(cfg) if with_vae_and_text else None
        self.image = _build_image(cfg)
        self.requires_grad_(False)
        self.eval()

    def train(self, mode: bool = True) -> FrozenEncoders:
        """Stays in eval mode (frozen encoders)."""
        return super().train(False)

    @torch.no_grad()
    def encode_video(self, video: torch.Tensor) -> torch.Tensor:
        """Video [B, 3, T, H, W] in [-1, 1] -> standardized latents [B, z, 1 + (T-1)/4, H/s, W/s] (float32)."""
        if self.vae is None:
            raise RuntimeError("no VAE: the batch needs 'video_latents' (model.online_encoders is false)")
        param = next(self.vae.parameters())
        mu = self.vae.encode(video.to(param.device, param.dtype)).latent_dist.mode()
        return normalize_latents(mu, self.vae)

    @torch.no_grad()
    def encode_text(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Token ids [B, L] and attention mask [B, L] -> last hidden state [B, L, text_dim] (float32)."""
        if self.text is None:
            raise RuntimeError("no text encoder: the batch needs 'prompt_embs' (model.online_encoders is false)")
        return self.text(input_ids=ids, attention_mask=mask).last_hidden_state.float()

    @torch.no_grad()
    def encode_image(self, frame: torch.Tensor) -> torch.Tensor:
        """First frame [B, 3, H, W] in [-1, 1] -> penultimate CLIP hidden state [B, 1 + patches, image_dim]."""
        size = self.image.config.image_size
        x = functional.interpolate(frame.float(), size=(size, size), mode="bicubic", align_corners=False)
        mean = torch.tensor(CLIP_MEAN, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(CLIP_STD, device=x.device).view(1, 3, 1, 1)
        x = ((x * 0.5 + 0.5) - mean) / std
        param = next(self.image.parameters())
        out = self.image(pixel_values=x.to(param.dtype), output_hidden_states=True)
        return out.hidden_states[-2].float()
