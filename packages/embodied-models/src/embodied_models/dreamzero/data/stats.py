"""Normalization statistics of the ``dreamzero`` strategy (q01 / q99 per state and action part).

Sources, in order: ``data.stats_path``, ``meta/stats.json``, else computed from the data parquet in memory
(mean, std, min, max and the 1 % / 99 % quantiles over every frame of every float column, as DreamZero computes
them). DreamZero writes the computed file into the dataset directory; we never write into a dataset: pass the
result on, or save it elsewhere with :func:`write_stats`.

With ``relative_action``, the relative parts use ``meta/relative_stats_dreamzero.json``, else statistics of
``action[i .. i+h-1] - state[i]`` over every anchor ``i`` whose chunk of ``h`` steps fits in the episode
(DreamZero's pooling; ``h`` = 24 for DROID language chunks, the action horizon otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from embodied_core.errors import DataError
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.lerobot.table import load_table

__all__ = ["RELATIVE_STATS_FILE", "Stats", "compute_relative_stats", "compute_stats", "load_stats", "part_stats",
           "write_stats"]

RELATIVE_STATS_FILE = "meta/relative_stats_dreamzero.json"
Stats = dict[str, dict[str, np.ndarray]]
_NAMES = ("mean", "std", "min", "max", "q01", "q99")


def _summary(values: np.ndarray) -> dict[str, np.ndarray]:
    return {"mean": np.mean(values, axis=0), "std": np.std(values, axis=0), "min": np.min(values, axis=0),
            "max": np.max(values, axis=0), "q01": np.quantile(values, 0.01, axis=0),
            "q99": np.quantile(values, 0.99, axis=0)}


def _read(path: Path) -> Stats:
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    out: Stats = {}
    for key, entry in raw.items():
        if isinstance(entry, Mapping) and "q01" in entry and "q99" in entry:
            out[key] = {name: np.asarray(value, dtype=np.float64) for name, value in entry.items()
                        if name in _NAMES}
    return out


def compute_stats(meta: LeRobotMeta, columns: Sequence[str]) -> Stats:
    """Statistics of the float ``columns`` over every frame of every episode (float32 values, DreamZero's
    ``np.quantile`` defaults)."""
    table = load_table(meta, list(meta.episodes), columns=list(dict.fromkeys([*columns, "index", "episode_index"])))
    out: Stats = {}
    for column in columns:
        values = np.asarray(table.columns[column], dtype=np.float32)
        out[column] = _summary(values.reshape(len(values), -1))
    return out


def load_stats(meta: LeRobotMeta, columns: Sequence[str], *, stats_path: str | Path | None = None) -> Stats:
    """Stats of ``columns``: from ``stats_path`` or ``meta/stats.json``, else computed (never written)."""
    path = Path(stats_path) if stats_path is not None else meta.root / "meta" / "stats.json"
    if stats_path is not None and not path.exists():
        raise DataError(f"data.stats_path={str(stats_path)!r}: no such file")
    stored = _read(path) if path.exists() else {}
    missing = [c for c in columns if c not in stored]
    if missing and stats_path is not None:
        raise DataError(f"{path}: no q01/q99 statistics for {missing} (has {', '.join(stored) or 'none'})")
    if missing:
        stored.update(compute_stats(meta, missing))
    return {c: stored[c] for c in columns}


def compute_relative_stats(meta: LeRobotMeta, *, state_column: str, state_slice: slice, action_column: str,
                           action_slice: slice, horizon: int) -> dict[str, np.ndarray]:
    """Statistics of ``action[i + j] - state[i]`` (``j < horizon``) over every anchor whose chunk fits."""
    table = load_table(meta, list(meta.episodes),
                       columns=list(dict.fromkeys([state_column, action_column, "index", "episode_index"])))
    state = np.asarray(table.columns[state_column], dtype=np.float32).reshape(len(table), -1)[:, state_slice]
    action = np.asarray(table.columns[action_column], dtype=np.float32).reshape(len(table), -1)[:, action_slice]
    pieces = []
    for start in np.unique(table.episode_start):
        end = int(table.episode_end[start])
        for i in range(int(start), end - horizon + 1):
            pieces.append(action[i:i + horizon] - state[i])
    if not pieces:
        raise DataError(f"{meta.root}: no episode is long enough for a relative-action chunk of {horizon} steps")
    return _summary(np.concatenate(pieces))


def load_relative_stats(meta: LeRobotMeta) -> Stats:
    """``meta/relative_stats_dreamzero.json`` (part name -> stats), empty when absent."""
    path = meta.root / RELATIVE_STATS_FILE
    return _read(path) if path.exists() else {}


def part_stats(stats: Mapping[str, np.ndarray], part: slice) -> dict[str, np.ndarray]:
    """One part (a slice of the last dimension) of a column's stats."""
    return {name: np.asarray(value)[..., part] for name, value in stats.items()}


def write_stats(stats: Mapping[str, Mapping[str, np.ndarray]], path: str | Path) -> Path:
    """Saves stats as JSON (lists) at ``path`` (not inside a dataset)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({k: {n: np.asarray(v).tolist() for n, v in e.items()} for k, e in stats.items()},
                               indent=2))
    return path
