"""Names and lookup of checkpoint directories.

``<output-dir>/checkpoints/step_<N>/`` holds ``model.safetensors`` (or ``model.pt`` / ``dcp/``),
``training_state/`` and ``meta.json``; ``checkpoints/latest`` is a symlink to the newest complete one.
A directory named ``step_<N>`` is complete by construction: it is written under a temporary name and
renamed only when every file is on disk.
"""

from __future__ import annotations

import json
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


def list_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``root`` as ``(step, path)``, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _STEP_RE.match(child.name)
        if match and child.is_dir() and not child.is_symlink() and (child / META_FILE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


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


def read_meta(path: str | Path) -> dict[str, Any]:
    """``meta.json`` of a checkpoint directory; CheckpointError when it is not a complete checkpoint."""
    meta_path = Path(path) / META_FILE
    if not meta_path.is_file():
        raise CheckpointError(f"{path} is not a complete checkpoint: {META_FILE} is missing")
    return json.loads(meta_path.read_text())
