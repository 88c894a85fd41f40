"""The data parquet rows of the selected episodes, held as one numpy array per column.

Numpy arrays (not Python objects per row) keep the memory of DataLoader workers flat: forked workers share
the pages and reading a row touches no reference counts. Vector columns may be ``fixed_size_list`` (lerobot's
writer) or variable-length ``list`` (converted or third-party files); every row must have the same length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import DataError
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.parquet import read_schema, read_table

__all__ = ["EpisodeTable", "load_table"]


@attrs.define(kw_only=True)
class EpisodeTable:
    """Rows of the selected episodes, ordered by global ``index``.

    Attributes:
        columns: column -> array with one row per frame (``[N]`` scalars, ``[N, D]`` vectors; image columns
            hold encoded bytes as an object array).
        episode_start: per row, the position of its episode's first row.
        episode_end: per row, one past the position of its episode's last row.
        episodes: the selected episode indices, sorted.
    """

    columns: dict[str, np.ndarray]
    episode_start: np.ndarray
    episode_end: np.ndarray
    episodes: list[int]

    def __len__(self) -> int:
        return len(self.episode_start)


def _column_to_numpy(column: Any, *, name: str, path: Path) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = column.type
    if pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        if len(lengths) and (lengths.min() != lengths.max()):
            raise DataError(f"{path}: column {name!r} has rows of different lengths ({lengths.min()}..{lengths.max()})")
        flat = pc.list_flatten(column).to_numpy(zero_copy_only=False)
        return np.ascontiguousarray(flat.reshape(len(column), int(lengths[0]) if len(lengths) else 0))
    if pa.types.is_struct(kind):  # image features: {"bytes": ..., "path": ...}
        return np.asarray(column.field("bytes").to_pylist(), dtype=object)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return np.asarray(column.to_pylist(), dtype=object)
    return np.ascontiguousarray(column.to_numpy(zero_copy_only=False))


def _check_width(path: Path, name: str, values: np.ndarray, feature: Any) -> None:
    """A numeric column must hold as many values per row as ``info.json``'s shape declares."""
    if feature is None or feature.dtype in ("string", "image", "video") or values.dtype == object:
        return
    declared = math.prod(feature.shape) if feature.shape else 1
    width = math.prod(values.shape[1:])
    if width != declared:
        raise DataError(f"{path}: column {name!r} has {width} value(s) per row, but meta/info.json declares shape "
                        f"{list(feature.shape)} ({declared} value(s))")


def _read_file(path: Path, wanted: Sequence[str], episodes: set[int],
               features: dict[str, Any]) -> dict[str, np.ndarray]:
    import pyarrow.compute as pc

    if not path.exists():
        raise DataError(f"data file {path} is missing (needed for episodes {sorted(episodes)})")
    names = read_schema(path).names
    missing = [c for c in ("index", "episode_index") if c not in names]
    if missing:
        raise DataError(f"{path}: required columns {missing} are missing")
    table = read_table(path, columns=[c for c in wanted if c in names])
    file_episodes = set(np.unique(table.column("episode_index").to_numpy()).tolist())
    if not file_episodes <= episodes:  # v3.0: the file holds other episodes too
        table = table.filter(pc.is_in(table.column("episode_index"), value_set=_pa_array(sorted(episodes))))
    columns = {name: _column_to_numpy(table.column(name), name=name, path=path) for name in table.column_names}
    for name, values in columns.items():
        _check_width(path, name, values, features.get(name))
    return columns


def _pa_array(values: Iterable[int]) -> Any:
    import pyarrow as pa

    return pa.array(list(values), type=pa.int64())


def load_table(meta: LeRobotMeta, episodes: Sequence[int], *, columns: Sequence[str]) -> EpisodeTable:
    """Reads ``columns`` of ``episodes`` (sorted, unique) from their data files and checks the row counts."""
    selected = sorted(set(episodes))
    files: dict[Path, set[int]] = {}
    for ep in selected:
        files.setdefault(meta.data_file(ep), set()).add(ep)
    parts = [_read_file(path, columns, eps, meta.features) for path, eps in files.items()]
    present = set.intersection(*(set(p) for p in parts)) if parts else set()
    absent = [c for c in columns if c not in present]
    if absent:
        raise DataError(f"{meta.root}: data files lack the columns {absent} declared in meta/info.json")
    merged = {c: np.concatenate([p[c] for p in parts]) if len(parts) > 1 else parts[0][c] for c in columns}
    order = np.argsort(merged["index"], kind="stable")
    if not np.array_equal(order, np.arange(len(order))):
        merged = {c: v[order] for c, v in merged.items()}
    ep_col = merged["episode_index"]
    starts = np.zeros(len(ep_col), dtype=np.int64)
    ends = np.zeros(len(ep_col), dtype=np.int64)
    boundaries = np.flatnonzero(np.diff(ep_col)) + 1
    for lo, hi in zip(np.r_[0, boundaries], np.r_[boundaries, len(ep_col)], strict=True):
        ep = int(ep_col[lo])
        if hi - lo != meta.episodes[ep].length:
            raise DataError(f"{meta.data_file(ep)}: episode {ep} has {hi - lo} rows but meta says length "
                            f"{meta.episodes[ep].length}")
        starts[lo:hi], ends[lo:hi] = lo, hi
    found = np.unique(ep_col).tolist()
    if found != selected:
        lost = sorted(set(selected) - set(found))
        raise DataError(f"{meta.root}: no rows for episodes {lost} in their data files "
                        f"({', '.join(str(meta.data_file(e)) for e in lost[:3])})")
    return EpisodeTable(columns=merged, episode_start=starts, episode_end=ends, episodes=selected)
