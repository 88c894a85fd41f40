"""The policy folder: file names, ``policy.json`` and the exact statistics file (format 1).

Every checkpoint directory (and every folder ``embodied checkpoint export`` writes) holds, next to the weights::

    policy.json          format version, model plugin + version, resolved model/data config, the inference
                         interface (cameras in order, frame shapes, state/action keys, names and dims, horizon,
                         fps, task), the tokenizer reference, model-specific assets
    stats.safetensors    the normalization statistics training used, float64, one tensor per "<key>/<stat>"
    stats/               runs on a dataset mixture: the statistics of every embodiment but the default one
                         (policy.json "embodiments": per tag its data section, interface and stats file)
    tokenizer/           a copy of the tokenizer files when they are small (< 50 MB), else only referenced
    assets/              model-specific inference files (e.g. LingBot-VA's VAE and prompt embeddings)

Reading never executes code: JSON and safetensors only.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from embodied_core.checkpoint.layout import META_FILE, checkpoints_root, find_latest
from embodied_core.errors import CheckpointError

__all__ = [
    "ASSETS_DIR",
    "EMBODIMENT_STATS_DIR",
    "POLICY_FILE",
    "POLICY_FORMAT",
    "SMALL_FILES_BYTES",
    "STATS_FILE",
    "TOKENIZER_DIR",
    "copy_if_small",
    "folder_size",
    "read_policy_doc",
    "read_stats",
    "resolve_policy_dir",
    "write_stats",
]

POLICY_FORMAT = 1
"""Version of the folder layout this package writes and reads; bumped on any incompatible change."""
POLICY_FILE = "policy.json"
STATS_FILE = "stats.safetensors"
TOKENIZER_DIR = "tokenizer"
EMBODIMENT_STATS_DIR = "stats"
"""Statistics of the embodiments other than the default one (runs on a dataset mixture)."""
ASSETS_DIR = "assets"
SMALL_FILES_BYTES = 50 * 1024 * 1024
"""Tokenizers and assets up to this size are copied into the folder; larger ones are referenced by path."""

_STAT_SEP = "/"

logger = logging.getLogger("embodied.policy")


def folder_size(path: Path) -> int:
    """Total bytes of the files under ``path`` (a file's own size for a file)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def copy_if_small(source: Path, target: Path, *, what: str) -> bool:
    """Copies ``source`` to ``target`` when it is at most :data:`SMALL_FILES_BYTES`; False (referenced) otherwise."""
    size = folder_size(source)
    if size > SMALL_FILES_BYTES:
        logger.info("%s %s is %.0f MB: referenced by path, not copied into the policy folder", what, source,
                    size / 2**20)
        return False
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)
    return True


def write_stats(stats: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    """Writes ``{key: {stat: array}}`` as safetensors: floating values as float64 (exact), integers as int64."""
    from safetensors.numpy import save_file

    tensors: dict[str, np.ndarray] = {}
    for key, entry in stats.items():
        for stat, value in entry.items():
            if _STAT_SEP in stat:
                raise CheckpointError(f"statistic name {stat!r} of {key!r} contains {_STAT_SEP!r}")
            array = np.asarray(value)
            dtype = np.int64 if np.issubdtype(array.dtype, np.integer) else np.float64
            tensors[f"{key}{_STAT_SEP}{stat}"] = np.ascontiguousarray(array, dtype=dtype)
    save_file(tensors, str(path), metadata={"format": "embodied-stats/1"})


def read_stats(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Reads what :func:`write_stats` wrote; CheckpointError naming the file when it is missing or unreadable."""
    from safetensors.numpy import load_file

    if not path.is_file():
        raise CheckpointError(f"{path}: missing (the policy folder's normalization statistics)")
    try:
        flat = load_file(str(path))
    except Exception as exc:  # truncated or foreign files
        raise CheckpointError(f"{path}: not a readable safetensors statistics file ({exc})") from None
    stats: dict[str, dict[str, np.ndarray]] = {}
    for name, array in flat.items():
        key, _, stat = name.rpartition(_STAT_SEP)
        stats.setdefault(key, {})[stat] = array
    return stats


def resolve_policy_dir(path: str | Path) -> Path:
    """The policy folder ``path`` designates: a checkpoint or exported folder, a run's ``--output-dir`` or its
    ``checkpoints/`` folder (the newest complete checkpoint).

    Raises:
        CheckpointError: nothing at ``path``, no checkpoint under it, or a checkpoint without ``policy.json``.
    """
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such policy folder (expected a checkpoint directory, an exported "
                              "policy folder or a run's --output-dir)")
    if (path / POLICY_FILE).is_file():
        return path
    for root in (checkpoints_root(path), path):
        latest = find_latest(root)
        if latest is not None:
            return resolve_policy_dir(latest)
    if (path / META_FILE).is_file():
        raise CheckpointError(f"{path}: a checkpoint without {POLICY_FILE}; it was written before checkpoints "
                              "became policy folders (or the save was done by other code), so it lacks the "
                              "statistics and transform settings inference needs. Train (or resume) with this "
                              "version to write one.")
    raise CheckpointError(f"{path}: no {POLICY_FILE} and no complete checkpoint under it")


def read_policy_doc(folder: Path) -> dict[str, Any]:
    """``policy.json`` of ``folder``, checked for a readable format version."""
    from embodied_core.documents import read_json_document

    path = folder / POLICY_FILE
    doc = read_json_document(path, error=CheckpointError)  # size and nesting bounded: the folder may be foreign
    if not isinstance(doc, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    version = doc.get("policy_format")
    if version != POLICY_FORMAT:
        hint = ("written by a newer embodied; upgrade embodied-core" if isinstance(version, int)
                and version > POLICY_FORMAT else "not a policy folder of embodied")
        raise CheckpointError(f"{path}: policy_format {version!r} is not readable by this embodied-core (reads "
                              f"policy_format {POLICY_FORMAT}): {hint}")
    missing = [key for key in ("model_name", "model_config", "data_config", "interface") if key not in doc]
    if missing:
        raise CheckpointError(f"{path}: missing entries {missing}")
    return doc
