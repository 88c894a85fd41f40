"""Reading and writing FastWAM's text-cache entries (one ``.pt`` file per prompt, see :mod:`.prompts`).

Payload of an entry: ``context`` float32 [text_len, text_dim] (zero past the prompt's tokens), ``mask`` bool
[text_len], ``prompt`` (str), ``input_ids`` int64 [text_len], ``text_len``, ``encoder_id`` and ``context_len``
(= text_len, the name LoongForge's files use). Files are read with ``torch.load(weights_only=True)`` (no code runs);
LoongForge's entries (``context`` + ``mask``, or ``context_mask``) read the same way. ``INDEX.json`` lists
prompt -> file for people and tools; the reader never needs it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from embodied_core.errors import DataError
from embodied_models.fastwam.data.prompts import INDEX_NAME, precompute_hint

__all__ = ["TextEntry", "read_entry", "update_index", "write_entry"]


@attrs.frozen
class TextEntry:
    """One prompt's cached embedding."""

    context: torch.Tensor
    """float32 [text_len, text_dim]."""
    mask: torch.Tensor
    """bool [text_len]: the prompt's real tokens."""


def read_entry(path: Path, *, prompt: str, text_len: int, text_dim: int) -> TextEntry:
    """The entry stored at ``path`` for ``prompt``, checked against the run's ``text_len`` / ``text_dim``.

    Raises:
        DataError: unreadable file, missing tensors, another prompt, or other shapes (naming the file and fix).
    """
    fix = f"rebuild it with: {precompute_hint(None, path.parent, text_len=text_len, encoder_id='<encoder id>')}"
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: torch raises several types
        raise DataError(f"{path}: cannot read the text-cache entry ({type(exc).__name__}: {exc}); {fix}") from None
    if not isinstance(payload, Mapping):
        raise DataError(f"{path}: expected a dict payload with 'context' and 'mask', got {type(payload).__name__}")
    context = payload.get("context")
    mask = payload.get("mask", payload.get("context_mask"))
    if not isinstance(context, torch.Tensor) or not isinstance(mask, torch.Tensor):
        raise DataError(f"{path}: the payload lacks the 'context' and 'mask' tensors (keys: {sorted(payload)}); {fix}")
    stored_prompt = payload.get("prompt")
    if stored_prompt is not None and stored_prompt != prompt:
        raise DataError(f"{path}: holds the prompt {stored_prompt!r}, not {prompt!r}; {fix}")
    if tuple(context.shape) != (text_len, text_dim) or tuple(mask.shape) != (text_len,):
        raise DataError(f"{path}: context {tuple(context.shape)} / mask {tuple(mask.shape)}, but the run needs "
                        f"[{text_len}, {text_dim}] / [{text_len}] (data.text_len, data.text_dim); {fix}")
    return TextEntry(context=context.float(), mask=mask.bool())


def _atomic_write(path: Path, write: Any) -> None:
    from embodied_core.storage import guard_write

    with guard_write(path, what="a text-cache file",
                     after="the cache files written before it are complete; rerun the command once there is room"):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                write(handle)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def write_entry(path: Path, *, prompt: str, context: torch.Tensor, mask: torch.Tensor, input_ids: torch.Tensor,
                encoder_id: str) -> None:
    """Writes one entry atomically (a temporary file in the same folder, then renamed)."""
    text_len = int(mask.shape[0])
    payload = {"context": context.detach().to("cpu", torch.float32).contiguous(),
               "mask": mask.detach().to("cpu", torch.bool).contiguous(),
               "input_ids": input_ids.detach().to("cpu", torch.int64).contiguous(),
               "prompt": prompt, "text_len": text_len, "context_len": text_len, "encoder_id": encoder_id}
    _atomic_write(path, lambda handle: torch.save(payload, handle))


def update_index(cache_dir: Path, entries: Mapping[str, Mapping[str, Any]]) -> Path:
    """Merges ``prompt -> {file, task, ...}`` into ``INDEX.json`` (atomically); returns its path."""
    path = cache_dir / INDEX_NAME
    index: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"{path}: unreadable ({exc}); delete it, the next run rewrites it") from None
        # a list of records (LoongForge's fake caches) or our mapping
        if isinstance(loaded, list):
            index = {str(r["prompt"]): dict(r) for r in loaded if isinstance(r, dict) and "prompt" in r}
        elif isinstance(loaded, dict):
            index = dict(loaded)
    index.update({prompt: dict(entry) for prompt, entry in entries.items()})
    data = (json.dumps(index, indent=1, sort_keys=True) + "\n").encode()
    _atomic_write(path, lambda handle: handle.write(data))
    return path
