"""Guarded readers of checkpoint files: nothing they load can run code, and every failure names the file.

Weights come from safetensors (no code by design) or from ``torch.load(weights_only=True)``; JSON from
``json``. A file that is missing, truncated, garbage, or a pickle that needs code is a
:class:`~embodied_core.errors.CheckpointError` whose message starts with the file's path. Every model's
checkpoint code and every checkpoint format read through these functions.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from embodied_core.errors import CheckpointError

__all__ = ["TORCH_SUFFIXES", "iter_tensors", "read_json", "read_tensors", "safetensors_shapes", "torch_load"]

TORCH_SUFFIXES = (".pt", ".pth", ".bin")
"""Suffixes of weight files written by ``torch.save`` (``pytorch_model.bin`` included)."""

_NESTED_STATE_KEYS = ("model", "state_dict", "module")
"""Entries under which training scripts commonly nest the weights of a ``torch.save`` file."""


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def torch_load(path: str | Path, *, lazy: bool = False) -> Any:
    """``torch.load(path, weights_only=True)`` onto the CPU; CheckpointError naming ``path`` on any failure.

    Args:
        lazy: memory-map tensor data (zip-format files only) so that checking a file reads little of it.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: file is missing")
    try:
        mmap = lazy and zipfile.is_zipfile(path)
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as exc:  # truncated, garbage, or a pickle that would need code
        raise CheckpointError(f"{path}: cannot be read as a plain tensor file with weights_only=True "
                              f"(truncated, corrupt, or a pickle that needs code, which is refused): "
                              f"{_reason(exc)}") from None


def read_json(path: str | Path) -> Any:
    """The JSON document in ``path``; CheckpointError naming it when missing, truncated, not JSON, or beyond the
    size and nesting limits of :mod:`embodied_core.documents`."""
    from embodied_core.documents import read_json_document

    return read_json_document(path, error=CheckpointError)


def safetensors_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """Key -> shape from a safetensors header (reads no tensor data; a truncated file is an error)."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: file is missing")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            return {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}  # noqa: SIM118
    except Exception as exc:
        raise CheckpointError(f"{path}: not a readable safetensors file (truncated or corrupt): "
                              f"{_reason(exc)}") from None


def _unnest(state: Any, path: Path) -> Mapping[str, torch.Tensor]:
    if isinstance(state, Mapping) and not all(isinstance(v, torch.Tensor) for v in state.values()):
        for key in _NESTED_STATE_KEYS:
            if isinstance(state.get(key), Mapping):
                return _unnest(state[key], path)
        raise CheckpointError(f"{path}: a dict whose values are not all tensors and that has no "
                              f"{' / '.join(repr(k) for k in _NESTED_STATE_KEYS)} entry of weights")
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{path}: holds a {type(state).__name__}, expected a dict of tensors")
    return state


def iter_tensors(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Yields ``(key, tensor)`` of one weights file, a tensor at a time where the format allows it.

    safetensors files are read lazily (one tensor in memory at a time); ``torch.save`` files are memory-mapped
    when they are zip files. A failure at any point is a CheckpointError naming ``path``.
    """
    path = Path(path)
    if path.suffix != ".safetensors":
        yield from _unnest(torch_load(path, lazy=True), path).items()
        return
    from safetensors import safe_open

    if not path.is_file():
        raise CheckpointError(f"{path}: file is missing")
    try:
        handle_cm = safe_open(str(path), framework="pt", device="cpu")
        handle = handle_cm.__enter__()
    except Exception as exc:
        raise CheckpointError(f"{path}: not a readable safetensors file (truncated or corrupt): "
                              f"{_reason(exc)}") from None
    try:
        for key in handle.keys():  # noqa: SIM118 - safe_open is not a Mapping
            try:
                tensor = handle.get_tensor(key)
            except Exception as exc:
                raise CheckpointError(f"{path}: tensor {key!r} cannot be read: {_reason(exc)}") from None
            yield key, tensor
    finally:
        handle_cm.__exit__(None, None, None)


def read_tensors(path: str | Path) -> dict[str, torch.Tensor]:
    """The whole ``key -> tensor`` dict of one weights file (see :func:`iter_tensors`)."""
    return dict(iter_tensors(path))
