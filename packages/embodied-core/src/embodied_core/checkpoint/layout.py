"""Names and lookup of checkpoint directories.

``<output-dir>/checkpoints/step_<N>/`` holds ``model.safetensors`` (or ``model.pt`` / ``dcp/``),
``training_state/`` and ``meta.json``; ``checkpoints/latest`` is a symlink to the newest complete one.
A directory named ``step_<N>`` is complete by construction: it is written under a temporary name and
renamed only when every file is on disk.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from embodied_core.errors import CheckpointError

__all__ = [
    "META_FILE",
    "MODEL_PT",
    "MODEL_SAFETENSORS",
    "TRAINING_STATE_DIR",
    "find_latest",
    "list_checkpoints",
    "list_step_dirs",
    "read_meta",
    "step_dir",
]

MODEL_SAFETENSORS = "model.safetensors"
MODEL_PT = "model.pt"
TRAINING_STATE_DIR = "training_state"
META_FILE = "meta.json"
LATEST = "latest"
_STEP_RE = re.compile(r"^step_(\d+)$")


def checkpoints_root(output_dir: str | Path) -> Path:
    """``<output_dir>/checkpoints``."""
    return Path(output_dir) / "checkpoints"


def step_dir(root: str | Path, step: int) -> Path:
    """``<root>/step_<step>``."""
    return Path(root) / f"step_{step}"


def list_step_dirs(root: str | Path) -> list[tuple[int, Path]]:
    """Every ``step_<N>`` directory under ``root`` as ``(step, path)``, oldest first, complete or not."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _STEP_RE.match(child.name)
        if match and child.is_dir() and not child.is_symlink():
            found.append((int(match.group(1)), child))
    return sorted(found)


def list_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``root`` (those with ``meta.json``) as ``(step, path)``, oldest first."""
    return [(step, path) for step, path in list_step_dirs(root) if (path / META_FILE).is_file()]


def find_latest(root: str | Path) -> Path | None:
    """The newest complete checkpoint under ``root`` (``latest`` if valid, else the highest step)."""
    root = Path(root)
    latest = root / LATEST
    if latest.is_symlink() or latest.is_dir():
        target = latest.resolve()
        if (target / META_FILE).is_file():
            return target
    found = list_checkpoints(root)
    return found[-1][1] if found else None


_META_KEYS = {"step": int, "format": str, "world_size": int}


def read_meta(path: str | Path) -> dict[str, Any]:
    """``meta.json`` of a checkpoint directory, checked for the keys every reader needs.

    Raises:
        CheckpointError: naming ``meta.json`` when it is missing, truncated, not JSON, or lacks a key.
    """
    from embodied_core.documents import read_json_document

    meta_path = Path(path) / META_FILE
    if not meta_path.is_file():
        raise CheckpointError(f"{meta_path}: file is missing ({path} is not a complete checkpoint)")
    meta = read_json_document(meta_path, error=CheckpointError)
    if not isinstance(meta, dict):
        raise CheckpointError(f"{meta_path}: holds a {type(meta).__name__}, expected an object")
    for key, kind in _META_KEYS.items():
        if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
            raise CheckpointError(f"{meta_path}: {key!r} is missing or not {kind.__name__} "
                                  f"(got {meta.get(key)!r})")
    return meta
