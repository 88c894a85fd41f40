"""Stats of a LeRobot dataset directory for a selection of episodes.

Where each stat comes from:
- ``min``/``max``/``mean``/``std``/``count``: the dataset's own stats files aggregated over the selected
  episodes (v2.1 ``episodes_stats.jsonl``, v3.0 episode parquet; v2.0 ``stats.json`` only when every
  episode is selected, since it cannot be split). When none apply they are computed: numeric features
  exactly from the data parquet, images from frames sampled evenly over each episode.
- quantiles of numeric features: always computed from the data parquet (exact, see ``compute.py`` for why
  stored ones are not used).
- quantiles of images: from sampled frames, when image stats are computed or ``image_quantiles=True``.
  ``frames_per_episode`` is the average: each episode gets frames in proportion to its length.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import attrs
import numpy as np

from embodied_core.errors import DataError
from embodied_data.stats._layout import Layout, load_layout
from embodied_data.stats.compute import QUANTILES, aggregate_stats, compute_feature_stats, compute_image_stats
from embodied_data.stats.frames import decode_frames_at, sample_positions
from embodied_data.stats.io import read_episodes_stats_jsonl, read_stats_json, read_v30_episode_stats, select_episodes

__all__ = ["DatasetStats", "dataset_stats", "read_numeric_columns"]

FeatureStats = dict[str, np.ndarray]


@attrs.frozen
class DatasetStats:
    """Stats per feature and, per feature, where they came from (for ``inspect`` and logs)."""

    stats: dict[str, FeatureStats]
    sources: dict[str, str]


def read_numeric_columns(layout: Layout, keys: list[str], episodes: Iterable[int]) -> dict[str, np.ndarray]:
    """Values ``[N, *shape]`` of numeric ``keys`` over ``episodes`` (frames in episode order)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    wanted = list(episodes)
    by_file: dict[Path, list[int]] = {}
    for ep in wanted:
        by_file.setdefault(layout.episodes[ep].data_file, []).append(ep)
    columns: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for file, eps in by_file.items():
        if not file.is_file():
            raise DataError(f"data file missing: {file} (episode(s) {eps[:5]})")
        table = pq.read_table(file, columns=list(dict.fromkeys([*keys, "episode_index"])))
        table = table.filter(pc.is_in(table.column("episode_index"), value_set=pa.array(eps, type=pa.int64())))
        for key in keys:
            column = table.column(key).combine_chunks()
            values = np.asarray(column.to_pylist(), dtype=np.float64)
            columns[key].append(values)
    return {k: np.concatenate(v) for k, v in columns.items()}


def _stored_moments(layout: Layout, episodes: list[int], *, all_selected: bool) -> tuple[dict[str, FeatureStats], str]:
    meta = layout.root / "meta"
    if layout.version == "v2.1" and (meta / "episodes_stats.jsonl").is_file():
        per = read_episodes_stats_jsonl(meta / "episodes_stats.jsonl")
        where = str(meta / "episodes_stats.jsonl")
        return aggregate_stats(select_episodes(per, episodes, where=where)), "episodes_stats.jsonl"
    if layout.version == "v3.0":
        per = read_v30_episode_stats(meta)
        if per:
            where = str(meta / "episodes")
            return aggregate_stats(select_episodes(per, episodes, where=where)), "meta/episodes stats"
    if all_selected and (meta / "stats.json").is_file():
        stored = read_stats_json(meta / "stats.json")
        moments = {k: {s: v for s, v in per.items() if s not in QUANTILES} for k, per in stored.items()}
        return moments, "stats.json"
    return {}, ""


def _image_stats(layout: Layout, key: str, episodes: list[int], frames_per_episode: int) -> FeatureStats:
    # Frames per episode proportional to its length, so long episodes weigh as much as they do in the data.
    total = sum(layout.episodes[ep].length for ep in episodes)
    stride = max(1.0, total / (frames_per_episode * len(episodes)))
    sampled = []
    for ep in episodes:
        ref = layout.episodes[ep]
        if key not in ref.videos:
            raise DataError(f"{key}: episode {ep} has no video entry")
        path, start = ref.videos[key]
        positions = sample_positions(ref.length, max(1, round(ref.length / stride)))
        times = [start + k / layout.fps for k in positions]
        sampled.append(decode_frames_at(path, times, fps=layout.fps, episode=ep))
    stats = compute_image_stats(np.concatenate(sampled))
    stats["count"] = np.array([sum(layout.episodes[e].length for e in episodes)], dtype=np.int64)
    return stats


def dataset_stats(root: Path, *, episodes: Iterable[int] | None = None, frames_per_episode: int = 8,
                  image_quantiles: bool = False) -> DatasetStats:
    """Stats of the dataset at ``root`` over ``episodes`` (all when None); see the module docstring."""
    layout = load_layout(root)
    selected = sorted(layout.episodes) if episodes is None else sorted(set(episodes))
    unknown = [e for e in selected if e not in layout.episodes]
    if unknown:
        raise DataError(f"{root}: episode(s) {unknown[:10]} not in the dataset (it has {len(layout.episodes)})")
    stored, stored_source = _stored_moments(layout, selected, all_selected=len(selected) == len(layout.episodes))
    numeric = [k for k in layout.numeric_keys()]
    values = read_numeric_columns(layout, numeric, selected)
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
    for key in layout.keys_of("video"):
        if key in stored and not image_quantiles:
            stats[key] = dict(stored[key])
            sources[key] = stored_source
            continue
        sampled = _image_stats(layout, key, selected, frames_per_episode)
        if key in stored:
            stats[key] = {**dict(stored[key]), **{q: sampled[q] for q in QUANTILES}}
            sources[key] = f"{stored_source}; quantiles from {frames_per_episode} sampled frames/episode"
        else:
            stats[key] = sampled
            sources[key] = f"computed from {frames_per_episode} sampled frames/episode"
    return DatasetStats(stats=stats, sources=sources)
