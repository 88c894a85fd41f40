"""Stats of a LeRobot dataset directory for a selection of episodes.

Where each stat comes from:
- ``min``/``max``/``mean``/``std``/``count``: the dataset's own stats files aggregated over the selected
  episodes (v2.1 ``episodes_stats.jsonl``, v3.0 episode parquet; v2.0 ``stats.json`` only when every
  episode is selected, since it cannot be split). When none apply they are computed: numeric features
  exactly from the data parquet, cameras (video, or images in the parquet) from sampled frames.
- quantiles of numeric features: always computed from the data parquet (exact, see ``compute.py`` for why
  stored ones are not used).
- quantiles of images: from sampled frames, when image stats are computed or ``image_quantiles=True``.
  ``frames_per_episode`` is the average: each episode gets frames in proportion to its length.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from embodied_core.errors import DataError
from embodied_data.parquet import read_schema, read_table
from embodied_data.stats.compute import QUANTILES, aggregate_stats, compute_feature_stats, compute_image_stats
from embodied_data.stats.frames import decode_frames_at, sample_positions
from embodied_data.stats.io import read_episodes_stats_jsonl, read_stats_json, read_v30_episode_stats, select_episodes

if TYPE_CHECKING:
    from embodied_data.lerobot.metadata import LeRobotMeta

__all__ = ["DatasetStats", "dataset_stats", "read_numeric_columns"]

FeatureStats = dict[str, np.ndarray]


@attrs.frozen
class DatasetStats:
    """Stats per feature and, per feature, where they came from (for ``inspect`` and logs)."""

    stats: dict[str, FeatureStats]
    sources: dict[str, str]


def _column_values(column: Any, *, where: str) -> np.ndarray:
    """A parquet column of scalars or (fixed or variable size) lists -> float64 ``[N]`` or ``[N, D]``."""
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type) or \
            pa.types.is_fixed_size_list(column.type):
        sizes = set(column.value_lengths().to_pylist()) if not pa.types.is_fixed_size_list(column.type) else None
        if sizes is not None and len(sizes) > 1:
            raise DataError(f"{where}: rows have different vector lengths {sorted(sizes)[:5]}")
        flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
        return flat.reshape(len(column), -1)
    return column.to_numpy(zero_copy_only=False).astype(np.float64)


def _rows_by_file(meta: LeRobotMeta, episodes: Iterable[int], columns: list[str]) -> Iterator[Any]:
    """Tables of ``columns`` (+ ``episode_index``) per data file, filtered to ``episodes``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    by_file: dict[Path, list[int]] = {}
    for ep in episodes:
        by_file.setdefault(meta.data_file(ep), []).append(ep)
    for file, eps in by_file.items():
        if not file.is_file():
            raise DataError(f"data file missing: {file} (episode(s) {eps[:5]})")
        wanted = list(dict.fromkeys([*columns, "episode_index"]))
        absent = [c for c in wanted if c not in read_schema(file).names]
        if absent:
            raise DataError(f"{file}: column(s) {absent} declared in meta/info.json are absent")
        table = read_table(file, columns=wanted)
        yield file, table.filter(pc.is_in(table.column("episode_index"), value_set=pa.array(eps, type=pa.int64())))


def read_numeric_columns(meta: LeRobotMeta, keys: list[str], episodes: Iterable[int]) -> dict[str, np.ndarray]:
    """Values ``[N, *shape]`` of numeric ``keys`` over ``episodes`` (frames in file order)."""
    columns: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for file, table in _rows_by_file(meta, episodes, keys):
        for key in keys:
            columns[key].append(_column_values(table.column(key), where=f"{file}:{key}"))
    return {k: np.concatenate(v) for k, v in columns.items()}


def _stored_moments(meta: LeRobotMeta, episodes: list[int], *,
                    all_selected: bool) -> tuple[dict[str, FeatureStats], str]:
    root = meta.root / "meta"
    if meta.version == "v2.1" and (root / "episodes_stats.jsonl").is_file():
        per = read_episodes_stats_jsonl(root / "episodes_stats.jsonl")
        where = str(root / "episodes_stats.jsonl")
        return aggregate_stats(select_episodes(per, episodes, where=where)), "episodes_stats.jsonl"
    if meta.version == "v3.0":
        per = read_v30_episode_stats(root)
        if per:
            return aggregate_stats(select_episodes(per, episodes, where=str(root / "episodes"))), "meta/episodes stats"
    if all_selected and (root / "stats.json").is_file():
        stored = read_stats_json(root / "stats.json")
        moments = {k: {s: v for s, v in per.items() if s not in QUANTILES} for k, per in stored.items()}
        return moments, "stats.json"
    return {}, ""


def _sample_plan(meta: LeRobotMeta, episodes: list[int], frames_per_episode: int) -> dict[int, list[int]]:
    # Frames per episode proportional to its length, so long episodes weigh as much as they do in the data.
    total = sum(meta.episodes[ep].length for ep in episodes)
    stride = max(1.0, total / (frames_per_episode * len(episodes)))
    return {ep: sample_positions(meta.episodes[ep].length, max(1, round(meta.episodes[ep].length / stride)))
            for ep in episodes}


def _decode_parquet_image(value: Any, *, where: str) -> np.ndarray:
    import io

    from PIL import Image

    data = value.get("bytes") if isinstance(value, dict) else value
    if not data:
        raise DataError(f"{where}: image cell holds no bytes")
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).transpose(2, 0, 1)


def _image_stats(meta: LeRobotMeta, key: str, episodes: list[int], frames_per_episode: int) -> FeatureStats:
    plan = _sample_plan(meta, episodes, frames_per_episode)
    sampled = []
    if meta.features[key].is_video:
        for ep, positions in plan.items():
            start = meta.video_from_timestamp(ep, key)
            times = [start + k / meta.fps for k in positions]
            sampled.append(decode_frames_at(meta.video_file(ep, key), times, fps=meta.fps, episode=ep))
    else:  # images stored in the data parquet (dtype "image")
        for file, table in _rows_by_file(meta, episodes, [key, "frame_index"]):
            episode_index = table.column("episode_index").to_pylist()
            frame_index = table.column("frame_index").to_pylist()
            cells = table.column(key)
            for row, (ep, frame) in enumerate(zip(episode_index, frame_index, strict=True)):
                if frame in plan[ep]:
                    sampled.append(_decode_parquet_image(cells[row].as_py(), where=f"{file}:{key} row {row}")[None])
    stats = compute_image_stats(np.concatenate(sampled))
    stats["count"] = np.array([sum(meta.episodes[e].length for e in episodes)], dtype=np.int64)
    return stats


def dataset_stats(root: str | Path, *, episodes: Iterable[int] | None = None, frames_per_episode: int = 8,
                  image_quantiles: bool = False, cameras: bool = True) -> DatasetStats:
    """Stats of the dataset at ``root`` over ``episodes`` (all when None); see the module docstring.

    ``cameras=False`` leaves the camera features out (no frame is decoded): the normalization statistics a
    training dataset hands to a model's transforms are those of its numeric features.
    """
    from embodied_data.lerobot.metadata import LeRobotMeta

    meta = LeRobotMeta.load(root)
    selected = sorted(meta.episodes) if episodes is None else sorted(set(episodes))
    unknown = [e for e in selected if e not in meta.episodes]
    if unknown:
        raise DataError(f"{root}: episode(s) {unknown[:10]} not in the dataset (it has {len(meta.episodes)})")
    stored, stored_source = _stored_moments(meta, selected, all_selected=len(selected) == len(meta.episodes))
    numeric = [k for k, f in meta.features.items() if f.dtype not in ("video", "image", "string")]
    values = read_numeric_columns(meta, numeric, selected)
    stats: dict[str, FeatureStats] = {}
    sources: dict[str, str] = {}
    for key in numeric:
        exact = compute_feature_stats(values[key])
        if key in stored:
            stats[key] = {**{s: np.asarray(v) for s, v in stored[key].items()},
                          **{q: exact[q] for q in QUANTILES}}
            sources[key] = f"{stored_source}; quantiles computed from data"
        else:
            stats[key] = exact
            sources[key] = "computed from data"
    for key in [k for k, f in meta.features.items() if cameras and (f.is_video or f.is_image)]:
        if key in stored and not image_quantiles:
            stats[key] = dict(stored[key])
            sources[key] = stored_source
            continue
        sampled = _image_stats(meta, key, selected, frames_per_episode)
        if key in stored:
            stats[key] = {**dict(stored[key]), **{q: sampled[q] for q in QUANTILES}}
            sources[key] = f"{stored_source}; quantiles from {frames_per_episode} sampled frames/episode"
        else:
            stats[key] = sampled
            sources[key] = f"computed from {frames_per_episode} sampled frames/episode"
    return DatasetStats(stats=stats, sources=sources)
