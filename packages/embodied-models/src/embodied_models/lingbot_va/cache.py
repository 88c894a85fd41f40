"""The LingBot-VA latent cache: Wan2.2 VAE latents per episode and UMT5 embeddings per task.

Layout under ``<dataset>/<data.latent_cache>/`` (default ``latents/``)::

    meta.json                     what was encoded and how (checked against the run's DataConfig)
    text.safetensors              "task_<i>" -> [T_i, text_dim] (valid rows only), "empty" -> [T_0, text_dim]
    episode_<e:06d>.safetensors   "latents" [C, L, H, W] (normalized, cameras tiled), "frame_index" [4(L-1)+1]

Video frames of an episode are taken every ``video_stride`` dataset frames from its first frame; the Wan2.2 VAE
turns ``4 (L - 1) + 1`` of them into ``L`` latent frames (latent frame l ends at video frame 4l). Every file is
written to a temporary name and renamed, so an interrupted run leaves no half file and a rerun resumes (the
generic parts are :mod:`embodied_models.wan.cache`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embodied_models.wan import cache as wan_cache
from embodied_models.wan.cache import META_NAME, write_atomic_safetensors

__all__ = ["CACHE_FORMAT", "META_NAME", "CacheSpec", "cache_dir", "episode_file", "num_latent_frames",
           "read_cache_meta", "write_atomic_safetensors", "write_cache_meta"]

CACHE_FORMAT = "embodied-lingbot-va-latents/1"
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


def write_cache_meta(cache: Path, spec: CacheSpec) -> None:
    """Writes ``meta.json`` atomically."""
    wan_cache.write_cache_meta(cache, spec, format_name=CACHE_FORMAT)


def read_cache_meta(cache: Path, *, command_hint: str) -> CacheSpec:
    """``meta.json`` of a cache; a missing or foreign cache is a DataError saying how to build it."""
    return wan_cache.read_cache_meta(cache, format_name=CACHE_FORMAT, what="LingBot-VA latent cache",
                                     command_hint=command_hint)


def check_cache_matches(meta: CacheSpec, wanted: CacheSpec, *, cache: Path, command_hint: str) -> None:
    """Raises a DataError listing every setting in which the cache differs from the run."""
    wan_cache.check_cache_matches(meta, wanted, MATCHED_KEYS, cache=cache, command_hint=command_hint,
                                  override_hint="data.latent_cache")
