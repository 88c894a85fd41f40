"""The LingBot-VA latent cache: Wan2.2 VAE latents per episode and UMT5 embeddings per task.

Layout under ``<dataset>/<data.latent_cache>/`` (default ``latents/``)::

    meta.json                     what was encoded and how (checked against the run's DataConfig)
    text.safetensors              "task_<i>" -> [T_i, text_dim] (valid rows only), "empty" -> [T_0, text_dim]
    episode_<e:06d>.safetensors   "latents" [C, L, H, W] (normalized, cameras tiled), "frame_index" [4(L-1)+1]

Video frames of an episode are taken every ``video_stride`` dataset frames from its first frame; the Wan2.2 VAE
turns ``4 (L - 1) + 1`` of them into ``L`` latent frames (latent frame l ends at video frame 4l). Every file is
written to a temporary name and renamed, so an interrupted run leaves no half file and a rerun resumes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from embodied_core.errors import DataError

__all__ = ["CACHE_FORMAT", "CacheSpec", "cache_dir", "episode_file", "num_latent_frames", "read_cache_meta",
           "write_atomic_safetensors"]

CACHE_FORMAT = "embodied-lingbot-va-latents/1"
META_NAME = "meta.json"
TEXT_NAME = "text.safetensors"
CacheSpec = dict[str, Any]
"""The settings a cache was built with: cameras, layout, image size, stride, latent channels, text width."""

# Settings that must agree between a cache and the run reading it.
MATCHED_KEYS = ("camera_keys", "camera_layout", "image_size", "video_stride")


def cache_dir(dataset_root: str | Path, latent_cache: str) -> Path:
    """``latent_cache`` resolved against the dataset root (absolute paths are kept)."""
    path = Path(latent_cache)
    return path if path.is_absolute() else Path(dataset_root) / path


def episode_file(cache: Path, episode: int) -> Path:
    """The latent file of one episode."""
    return cache / f"episode_{episode:06d}.safetensors"


def num_latent_frames(episode_length: int, video_stride: int) -> int:
    """Latent frames of an episode: ``(n - 1) // 4 + 1`` for its ``n`` strided video frames."""
    video_frames = (episode_length - 1) // video_stride + 1
    return (video_frames - 1) // 4 + 1


def write_atomic_safetensors(tensors: Mapping[str, torch.Tensor], path: Path,
                             metadata: Mapping[str, str] | None = None) -> None:
    """Writes a safetensors file under a temporary name, then renames it into place."""
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=dict(metadata or {}))
    tmp.replace(path)


def write_cache_meta(cache: Path, spec: CacheSpec) -> None:
    """Writes ``meta.json`` atomically."""
    tmp = cache / f".tmp-{os.getpid()}-{META_NAME}"
    tmp.write_text(json.dumps({"format": CACHE_FORMAT, **spec}, indent=2))
    tmp.replace(cache / META_NAME)


def read_cache_meta(cache: Path, *, command_hint: str) -> CacheSpec:
    """``meta.json`` of a cache; a missing or foreign cache is a DataError saying how to build it."""
    path = cache / META_NAME
    if not path.is_file():
        raise DataError(f"{cache}: no LingBot-VA latent cache ({META_NAME} missing). Build it with: {command_hint}")
    meta = json.loads(path.read_text())
    if meta.get("format") != CACHE_FORMAT:
        raise DataError(f"{path}: format {meta.get('format')!r}, expected {CACHE_FORMAT!r}; rebuild the cache with: "
                        f"{command_hint}")
    return meta


def check_cache_matches(meta: CacheSpec, wanted: CacheSpec, *, cache: Path, command_hint: str) -> None:
    """Raises a DataError listing every setting in which the cache differs from the run."""
    diffs = [f"{key}: cache {meta.get(key)!r} vs run {wanted[key]!r}" for key in MATCHED_KEYS
             if _plain(meta.get(key)) != _plain(wanted[key])]
    if diffs:
        raise DataError(f"{cache} was built with other data settings ({'; '.join(diffs)}); rebuild it (or point "
                        f"data.latent_cache elsewhere) with: {command_hint}")


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (tuple, list)) else value
