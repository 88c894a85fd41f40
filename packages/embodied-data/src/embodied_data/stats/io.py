"""Reading and writing the stats files of the three LeRobot layouts.

- v2.0: ``meta/stats.json``, global stats per feature (no count).
- v2.1: ``meta/episodes_stats.jsonl``, one line ``{"episode_index": i, "stats": {...}}`` per episode.
- v3.0: per-episode stats as ``stats/<feature>/<stat>`` columns of ``meta/episodes/**/*.parquet``, plus an
  aggregated ``meta/stats.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from embodied_core.errors import DataError
from embodied_data.parquet import read_schema, read_table

__all__ = [
    "read_episodes_stats_jsonl",
    "read_stats_json",
    "read_v30_episode_stats",
    "stats_to_json",
    "write_stats_json",
]

FeatureStats = dict[str, np.ndarray]


def _as_arrays(raw: Mapping[str, Any], *, where: str) -> dict[str, FeatureStats]:
    stats: dict[str, FeatureStats] = {}
    for key, per_stat in raw.items():
        if not isinstance(per_stat, Mapping):
            raise DataError(f"{where}: stats of {key!r} must be an object of stat -> values, got {type(per_stat)}")
        stats[key] = {}
        for name, value in per_stat.items():
            if value is None:
                continue
            dtype = np.int64 if name == "count" else np.float64
            try:
                stats[key][name] = np.asarray(value, dtype=dtype)
            except (TypeError, ValueError) as exc:
                raise DataError(f"{where}: {key}/{name} is not numeric ({exc})") from None
    return stats


def read_stats_json(path: Path) -> dict[str, FeatureStats]:
    """``meta/stats.json`` -> ``{feature: {stat: array}}``."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read stats file {path}: {exc}") from None
    if not isinstance(raw, Mapping):
        raise DataError(f"{path}: expected a JSON object of feature -> stats")
    return _as_arrays(raw, where=str(path))


def read_episodes_stats_jsonl(path: Path) -> dict[int, dict[str, FeatureStats]]:
    """``meta/episodes_stats.jsonl`` (v2.1) -> ``{episode_index: {feature: {stat: array}}}``."""
    per_episode: dict[int, dict[str, FeatureStats]] = {}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            episode = int(row["episode_index"])
            stats = row["stats"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}:{number}: expected {{'episode_index': int, 'stats': {{...}}}} ({exc})") from None
        per_episode[episode] = _as_arrays(stats, where=f"{path}:{number}")
    return per_episode


def read_v30_episode_stats(meta_dir: Path) -> dict[int, dict[str, FeatureStats]]:
    """``stats/<feature>/<stat>`` columns of ``meta/episodes/**/*.parquet`` (v3.0) per episode.

    Returns an empty dict when the episodes files carry no stats columns.
    """
    files = sorted(Path(meta_dir, "episodes").glob("**/*.parquet"))
    if not files:
        raise DataError(f"no episodes parquet under {Path(meta_dir, 'episodes')}")
    per_episode: dict[int, dict[str, FeatureStats]] = {}
    for file in files:
        schema = read_schema(file)
        columns = [name for name in schema.names if name.startswith("stats/")]
        if not columns:
            continue
        table = read_table(file, columns=["episode_index", *columns])
        episodes = table.column("episode_index").to_pylist()
        for name in columns:
            # Feature keys contain dots and may contain slashes; the stat name is the last component.
            feature, _, stat = name[len("stats/"):].rpartition("/")
            dtype = np.int64 if stat == "count" else np.float64
            for episode, value in zip(episodes, table.column(name).to_pylist(), strict=True):
                if value is not None:
                    per_episode.setdefault(int(episode), {}).setdefault(feature, {})[stat] = np.asarray(value, dtype)
    return per_episode


def stats_to_json(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    """Stats as plain JSON values (nested lists), the way LeRobot writes them."""
    return {key: {name: np.asarray(value).tolist() for name, value in per.items()} for key, per in stats.items()}


def write_stats_json(path: Path, stats: Mapping[str, Mapping[str, np.ndarray]]) -> None:
    """Writes ``stats`` as ``meta/stats.json``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(stats_to_json(stats), indent=4) + "\n")


def select_episodes(per_episode: Mapping[int, dict[str, FeatureStats]], episodes: Iterable[int],
                    *, where: str) -> list[dict[str, FeatureStats]]:
    """The stats of ``episodes`` in order; an error names the episodes that have none."""
    episodes = list(episodes)
    missing = [e for e in episodes if e not in per_episode]
    if missing:
        raise DataError(f"{where}: no stats for episode(s) {missing[:10]}{' ...' if len(missing) > 10 else ''}")
    return [per_episode[e] for e in episodes]
