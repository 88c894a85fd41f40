"""``embodied data inspect``: the checks of the data parquet files (the rows training reads).

Each data file is read once, in full, through :mod:`embodied_data.parquet` (a truncated or corrupt file is a
problem naming it, as it would stop training). Then, per file: the declared feature columns are present, each
numeric column's width matches the shape ``info.json`` declares, rows have one length per column, the row
count matches the episodes' lengths, and consecutive timestamps of an episode are ``1/fps`` apart (the
reader's sync check). The episodes' timestamps are handed on to the video checks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import DataError
from embodied_data.lerobot.features import FeatureInfo
from embodied_data.lerobot.metadata import format_ranges

__all__ = ["DataFileReport", "check_data_files"]

_NON_NUMERIC = {"string", "video", "image"}


@attrs.define
class DataFileReport:
    """What the data files hold: per-episode timestamps (for the video checks), problems, file counts."""

    timestamps: dict[int, np.ndarray] = attrs.field(factory=dict)
    """episode -> its rows' ``timestamp`` values (float64 of the stored float32), for readable files."""
    problems: list[str] = attrs.field(factory=list)
    total: int = 0
    missing: list[Path] = attrs.field(factory=list)


def _width(column: Any) -> tuple[int, int] | None:
    """(min, max) values per row of a list column, (1, 1) for a scalar column, None for nested lists."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_fixed_size_list(kind):
        return None if pa.types.is_nested(kind.value_type) else (kind.list_size, kind.list_size)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        if pa.types.is_nested(kind.value_type):
            return None
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        return (int(lengths.min()), int(lengths.max())) if len(lengths) else None
    return None if pa.types.is_nested(kind) else (1, 1)


def _check_widths(path: Path, table: Any, features: dict[str, FeatureInfo], problems: list[str]) -> None:
    for key, feature in features.items():
        if feature.dtype in _NON_NUMERIC or key not in table.column_names:
            continue
        width = _width(table.column(key))
        if width is None:
            continue
        low, high = width
        declared = math.prod(feature.shape) if feature.shape else 1
        if low != high:
            problems.append(f"{path}: column {key!r} has rows of different lengths ({low}..{high} values); "
                            f"info.json declares shape {list(feature.shape)}")
        elif low != declared:
            problems.append(f"{path}: column {key!r} has {low} value(s) per row, but info.json declares shape "
                            f"{list(feature.shape)} ({declared} value(s))")


def _check_timestamps(path: Path, episode: int, ts: np.ndarray, fps: float, tolerance_s: float,
                      problems: list[str]) -> None:
    gaps = np.diff(ts)
    bad = np.flatnonzero(np.abs(gaps - 1.0 / fps) > tolerance_s)
    if bad.size:
        row = int(bad[0])
        problems.append(f"{path}: episode {episode}: timestamps are not 1/fps apart at {bad.size} place(s), first "
                        f"between frame {row} (t={ts[row]:.6f}s) and frame {row + 1} (t={ts[row + 1]:.6f}s); fps "
                        f"{fps:g}, tolerance_s {tolerance_s}")


def _check_file(meta: Any, path: Path, episodes: list[Any], report: DataFileReport, tolerance_s: float) -> None:
    from embodied_data.parquet import read_table

    try:
        table = read_table(path)
    except DataError as exc:
        report.problems.append(str(exc))
        return
    declared = [k for k, f in meta.features.items() if not f.is_video]
    absent = [k for k in declared if k not in table.column_names]
    if absent:
        report.problems.append(f"{path}: declared feature column(s) {absent} are absent")
    expected = sum(ep.length for ep in episodes)
    if meta.version != "v3.0" and table.num_rows != expected:
        report.problems.append(f"{path}: {table.num_rows} rows, episode {episodes[0].index} has length {expected}")
    elif meta.version == "v3.0" and table.num_rows < expected:
        report.problems.append(f"{path}: {table.num_rows} rows, fewer than the {expected} frames of episode(s) "
                               f"{format_ranges(ep.index for ep in episodes)}")
    _check_widths(path, table, meta.features, report.problems)
    if "timestamp" not in table.column_names or "episode_index" not in table.column_names:
        return
    ts_all = np.asarray(table.column("timestamp").to_numpy(zero_copy_only=False), dtype=np.float64).reshape(-1)
    ep_all = np.asarray(table.column("episode_index").to_numpy(zero_copy_only=False)).reshape(-1)
    if len(ts_all) != len(ep_all):  # list-typed timestamp column of a foreign writer: width check reported it
        return
    if "index" in table.column_names:  # the reader orders rows by global index
        order = np.argsort(np.asarray(table.column("index").to_numpy(zero_copy_only=False)).reshape(-1),
                           kind="stable")
        ts_all, ep_all = ts_all[order], ep_all[order]
    for ep in episodes:
        ts = ts_all[ep_all == ep.index]
        if len(ts):
            report.timestamps[ep.index] = ts
            _check_timestamps(path, ep.index, ts, meta.fps, tolerance_s, report.problems)


def check_data_files(meta: Any, *, tolerance_s: float = 1e-4) -> DataFileReport:
    """Reads every data file of ``meta``'s episodes and checks it (see the module docstring)."""
    by_file: dict[Path, list[Any]] = defaultdict(list)
    for ep in meta.episodes.values():
        by_file[meta.data_file(ep.index)].append(ep)
    report = DataFileReport(total=len(by_file))
    missing_episodes: list[int] = []
    for path, episodes in by_file.items():
        if not path.is_file():
            report.missing.append(path)
            missing_episodes.extend(ep.index for ep in episodes)
            continue
        _check_file(meta, path, episodes, report, tolerance_s)
    if report.missing:
        report.problems.append(f"data files missing for {len(missing_episodes)} episode(s): "
                               f"{format_ranges(missing_episodes)}: {', '.join(str(p) for p in report.missing)}")
    return report
