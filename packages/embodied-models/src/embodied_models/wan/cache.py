"""Generic pieces of the Wan-family caches (VAE latents, text embeddings): atomic writes and ``meta.json``.

A cache folder holds a ``meta.json`` naming its format (``"format": "<name>/<version>"``) and the settings it was
built with. Every file is written under a temporary name and renamed into place, so an interrupted precompute
leaves no half file and a rerun resumes by skipping what exists; a full disk or a read-only cache folder removes the
temporary and raises :class:`~embodied_core.storage.StorageError` naming the file and the bytes it needed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from embodied_core.errors import DataError
from embodied_core.storage import guard_write

__all__ = ["META_NAME", "check_cache_matches", "read_cache_meta", "write_atomic_bytes", "write_atomic_safetensors",
           "write_cache_meta"]

META_NAME = "meta.json"


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".tmp-{os.getpid()}-{path.name}")


def write_atomic_safetensors(tensors: Mapping[str, torch.Tensor], path: Path,
                             metadata: Mapping[str, str] | None = None) -> None:
    """Writes a safetensors file under a temporary name, then renames it into place."""
    tmp = _tmp_name(path)
    needed = sum(t.numel() * t.element_size() for t in tensors.values())
    with guard_write(path, what="a cache file", needed_bytes=needed, cleanup=tmp,
                     after="the cache files written before it are complete; rerun the command once there is room"):
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=dict(metadata or {}))
        tmp.replace(path)


def write_atomic_bytes(data: bytes, path: Path) -> None:
    """Writes ``data`` under a temporary name, then renames it into place."""
    tmp = _tmp_name(path)
    with guard_write(path, what="a cache file", needed_bytes=len(data), cleanup=tmp,
                     after="the cache files written before it are complete; rerun the command once there is room"):
        tmp.write_bytes(data)
        tmp.replace(path)


def write_cache_meta(cache: Path, spec: Mapping[str, Any], *, format_name: str) -> None:
    """Writes ``<cache>/meta.json`` = ``{"format": format_name, **spec}`` atomically."""
    write_atomic_bytes(json.dumps({"format": format_name, **spec}, indent=2).encode(), cache / META_NAME)


def read_cache_meta(cache: Path, *, format_name: str, what: str, command_hint: str) -> dict[str, Any]:
    """``meta.json`` of a cache; a missing or foreign one is a DataError saying how to build it.

    Args:
        cache: the cache folder.
        format_name: the expected ``format`` value.
        what: the cache's name in messages (e.g. "LingBot-VA latent cache").
        command_hint: the command that builds the cache.
    """
    path = cache / META_NAME
    if not path.is_file():
        raise DataError(f"{cache}: no {what} ({META_NAME} missing). Build it with: {command_hint}")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc}); rebuild the cache with: {command_hint}") from exc
    if meta.get("format") != format_name:
        raise DataError(f"{path}: format {meta.get('format')!r}, expected {format_name!r}; rebuild the cache with: "
                        f"{command_hint}")
    return meta


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (tuple, list)) else value


def check_cache_matches(meta: Mapping[str, Any], wanted: Mapping[str, Any], keys: Iterable[str], *, cache: Path,
                        command_hint: str, override_hint: str = "") -> None:
    """Raises a DataError listing every setting in ``keys`` in which the cache differs from the run."""
    diffs = [f"{key}: cache {meta.get(key)!r} vs run {wanted[key]!r}" for key in keys
             if _plain(meta.get(key)) != _plain(wanted[key])]
    if diffs:
        elsewhere = f" (or point {override_hint} elsewhere)" if override_hint else ""
        raise DataError(f"{cache} was built with other data settings ({'; '.join(diffs)}); rebuild it{elsewhere} "
                        f"with: {command_hint}")
