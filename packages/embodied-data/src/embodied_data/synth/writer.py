"""Writes a synthetic LeRobot v3.0 dataset of the "reach the moving target" task (see ``task.py``).

Layout (what LeRobot 0.4's writer produces, so LeRobot and our reader both load it):

```
meta/info.json                 codebase_version v3.0, features, path templates, splits
meta/tasks.parquet             task_index + task string (as the pandas index column LeRobot writes)
meta/episodes/chunk-000/file-000.parquet   per episode: length, data/video file refs, from/to
                               timestamps, stats/<feature>/<stat> columns
meta/stats.json                stats over all episodes (quantiles exact; image quantiles from sampled frames)
data/chunk-000/file-NNN.parquet            frames; several episodes per file
videos/<camera>/chunk-000/file-NNN.mp4     episodes concatenated; frame k of a file at pts k / fps
```
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import DataError, UsageError
from embodied_data.lerobot.writer import write_data_table, write_tasks_table
from embodied_data.stats.compute import QUANTILES, aggregate_stats, compute_feature_stats, compute_image_stats
from embodied_data.stats.frames import sample_positions
from embodied_data.stats.io import write_stats_json
from embodied_data.synth.encode import pick_encoder, write_mp4
from embodied_data.synth.task import TASKS, Episode, TaskParams, render_frames, simulate_episode

__all__ = ["SynthConfig", "SynthSummary", "write_synthetic_dataset"]

_CHUNKS_SIZE = 1000
_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
_VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
_DEFAULT_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


@attrs.frozen(kw_only=True)
class SynthConfig:
    """What to synthesize."""

    num_episodes: int = 20
    fps: int = 10
    min_length: int = 40
    max_length: int = 60
    image_size: tuple[int, int] = (96, 96)
    """(height, width); both even (yuv420p)."""
    cameras: tuple[str, ...] = ("front",)
    """Camera views, any of ``front`` and ``wrist``; stored as ``observation.images.<view>``."""
    num_tasks: int = 1
    episodes_per_file: int | None = None
    """Episodes per data/video file (None: all in one file)."""
    codec: str | None = None
    """``h264`` or ``mpeg4``; None picks the best one the installed libav can encode."""
    seed: int = 0

    def problems(self) -> list[str]:
        """Invalid settings, one message each."""
        out = []
        if self.num_episodes < 1:
            out.append(f"--episodes must be >= 1 (got {self.num_episodes})")
        if self.fps < 1:
            out.append(f"--fps must be >= 1 (got {self.fps})")
        if not 2 <= self.min_length <= self.max_length:
            out.append(f"need 2 <= --min-length <= --max-length (got {self.min_length}, {self.max_length})")
        if any(side < 16 or side % 2 for side in self.image_size):
            out.append(f"--image-size sides must be even and >= 16 (got {self.image_size})")
        bad = [c for c in self.cameras if c not in ("front", "wrist")] or ([] if self.cameras else ["(none)"])
        if bad or len(set(self.cameras)) != len(self.cameras):
            out.append(f"--cameras: {', '.join(bad) or 'duplicates'} invalid; choose from front, wrist")
        if self.num_tasks not in (1, 2):
            out.append(f"--num-tasks must be 1 or 2 (got {self.num_tasks})")
        if self.episodes_per_file is not None and self.episodes_per_file < 1:
            out.append(f"--episodes-per-file must be >= 1 (got {self.episodes_per_file})")
        return out


@attrs.frozen
class SynthSummary:
    """What was written."""

    root: Path
    num_episodes: int
    num_frames: int
    codec: str
    cameras: tuple[str, ...]


def _features(config: SynthConfig, codec: str) -> dict[str, Any]:
    height, width = config.image_size
    features: dict[str, Any] = {
        "observation.state": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
        "action": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
    }
    for cam in config.cameras:
        features[f"observation.images.{cam}"] = {
            "dtype": "video", "shape": [height, width, 3], "names": ["height", "width", "channels"],
            "info": {"video.height": height, "video.width": width, "video.codec": codec, "video.pix_fmt": "yuv420p",
                     "video.is_depth_map": False, "video.fps": config.fps, "video.channels": 3, "has_audio": False},
        }
    features["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
    for name in _DEFAULT_COLUMNS[1:]:
        features[name] = {"dtype": "int64", "shape": [1], "names": None}
    return features


def _episode_columns(episode: Episode, *, episode_index: int, start: int, fps: int) -> dict[str, np.ndarray]:
    frames = np.arange(episode.length)
    return {
        "observation.state": episode.state,
        "action": episode.action,
        "timestamp": (frames / fps).astype(np.float32),
        "frame_index": frames.astype(np.int64),
        "episode_index": np.full(episode.length, episode_index, dtype=np.int64),
        "index": (start + frames).astype(np.int64),
        "task_index": np.full(episode.length, episode.task_index, dtype=np.int64),
    }


def _write_data_file(path: Path, columns: list[dict[str, np.ndarray]], features: dict[str, Any]) -> None:
    write_data_table(path, columns, features, keys=("observation.state", "action", *_DEFAULT_COLUMNS))


def _write_tasks(path: Path, tasks: Sequence[str]) -> None:
    write_tasks_table(path, tasks)


def _stats_row(stats: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    return {f"stats/{key}/{name}": np.asarray(v).tolist() for key, per in stats.items() for name, v in per.items()}


def _prepare_output(output: Path, overwrite: bool) -> None:
    if output.exists() and any(output.iterdir()):
        if not overwrite:
            raise UsageError(f"{output} exists and is not empty; choose another OUTPUT or pass --overwrite")
        if not (output / "meta" / "info.json").is_file():
            raise UsageError(f"refusing to overwrite {output}: it is not a LeRobot dataset (no meta/info.json)")
        shutil.rmtree(output)
    output.mkdir(parents=True, exist_ok=True)


def write_synthetic_dataset(output: Path, config: SynthConfig, *, overwrite: bool = False) -> SynthSummary:
    """Simulates, renders, encodes and writes the dataset; returns a summary."""
    problems = config.problems()
    if problems:
        raise UsageError("invalid synth settings:\n  " + "\n  ".join(problems))
    encoder, codec = pick_encoder(config.codec)
    output = Path(output)
    _prepare_output(output, overwrite)
    features = _features(config, codec)
    cam_keys = [f"observation.images.{c}" for c in config.cameras]
    rng = np.random.default_rng(config.seed)
    params = TaskParams(num_tasks=config.num_tasks)
    per_file = config.episodes_per_file or config.num_episodes
    rows: list[dict[str, Any]] = []
    episode_stats: list[dict[str, dict[str, np.ndarray]]] = []
    all_columns: list[dict[str, np.ndarray]] = []
    sampled_frames: dict[str, list[np.ndarray]] = {k: [] for k in cam_keys}
    start = 0
    for file_index, first in enumerate(range(0, config.num_episodes, per_file)):
        chunk_index, file_in_chunk = divmod(file_index, _CHUNKS_SIZE)
        file_columns, file_frames = [], {k: [] for k in cam_keys}
        video_time = 0.0
        for ep in range(first, min(first + per_file, config.num_episodes)):
            length = int(rng.integers(config.min_length, config.max_length + 1))
            episode = simulate_episode(rng, length=length, fps=config.fps, task_index=ep % config.num_tasks,
                                       params=params)
            columns = _episode_columns(episode, episode_index=ep, start=start, fps=config.fps)
            stats = {k: compute_feature_stats(v) for k, v in columns.items()}
            row: dict[str, Any] = {
                "episode_index": ep, "tasks": [TASKS[episode.task_index]], "length": length,
                "data/chunk_index": chunk_index, "data/file_index": file_in_chunk,
                "dataset_from_index": start, "dataset_to_index": start + length,
            }
            for cam, key in zip(config.cameras, cam_keys, strict=True):
                frames = render_frames(episode, height=config.image_size[0], width=config.image_size[1], view=cam)
                file_frames[key].append(frames)
                sampled_frames[key].append(frames[sample_positions(length, 8)])
                stats[key] = compute_image_stats(frames, channels_last=True)
                row.update({f"videos/{key}/chunk_index": chunk_index, f"videos/{key}/file_index": file_in_chunk,
                            f"videos/{key}/from_timestamp": video_time,
                            f"videos/{key}/to_timestamp": video_time + length / config.fps})
            video_time += length / config.fps
            row.update(_stats_row(stats))
            row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
            rows.append(row)
            episode_stats.append(stats)
            file_columns.append(columns)
            start += length
        _write_data_file(output / _DATA_PATH.format(chunk_index=chunk_index, file_index=file_in_chunk),
                         file_columns, features)
        for key in cam_keys:
            path = output / _VIDEO_PATH.format(video_key=key, chunk_index=chunk_index, file_index=file_in_chunk)
            frames = np.concatenate(file_frames[key])
            if write_mp4(path, frames, fps=config.fps, encoder=encoder) != len(frames):
                raise DataError(f"{path}: the encoder did not write every frame")
        all_columns.extend(file_columns)
    _write_meta(output, config, features, rows, episode_stats, all_columns, sampled_frames, num_frames=start)
    return SynthSummary(root=output, num_episodes=config.num_episodes, num_frames=start, codec=codec,
                        cameras=tuple(cam_keys))


def _write_meta(output: Path, config: SynthConfig, features: dict[str, Any], rows: list[dict[str, Any]],
                episode_stats: list[dict[str, dict[str, np.ndarray]]], all_columns: list[dict[str, np.ndarray]],
                sampled_frames: dict[str, list[np.ndarray]], *, num_frames: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = output / "meta"
    (meta / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), meta / "episodes" / "chunk-000" / "file-000.parquet")
    tasks = TASKS[: config.num_tasks]
    _write_tasks(meta / "tasks.parquet", tasks)
    stats = aggregate_stats(episode_stats)
    for key in all_columns[0]:
        exact = compute_feature_stats(np.concatenate([c[key] for c in all_columns]))
        stats[key].update({q: exact[q] for q in QUANTILES})
    for key, frames in sampled_frames.items():
        sampled = compute_image_stats(np.concatenate(frames), channels_last=True)
        stats[key].update({q: sampled[q] for q in QUANTILES})
    write_stats_json(meta / "stats.json", stats)
    info = {
        "codebase_version": "v3.0",
        "robot_type": "synthetic_point_arm",
        "total_episodes": config.num_episodes,
        "total_frames": num_frames,
        "total_tasks": len(tasks),
        "chunks_size": _CHUNKS_SIZE,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200,
        "fps": config.fps,
        "splits": {"train": f"0:{config.num_episodes}"},
        "data_path": _DATA_PATH,
        "video_path": _VIDEO_PATH,
        "features": features,
    }
    (meta / "info.json").write_text(json.dumps(info, indent=4) + "\n")
