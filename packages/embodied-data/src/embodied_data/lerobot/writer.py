"""Writes a LeRobot v3.0 dataset one episode at a time, resumably (what ``embodied data collect`` records with).

Layout (the v3.0 one LeRobot's own writer produces, one episode per data and video file):

```
meta/info.json                       codebase_version v3.0, features, path templates; written last, atomically
meta/tasks.parquet                   task_index + task string
meta/episodes/chunk-000/file-000.parquet   per episode: tasks, length, file refs, timestamps, stats/<key>/<stat>
meta/stats.json                      stats over all episodes (exact quantiles for numeric features; image
                                     quantiles from 8 frames per episode)
data/chunk-CCC/file-EEE.parquet      episode EEE's frames
videos/<camera>/chunk-CCC/file-EEE.mp4
```

After every :meth:`EpisodeWriter.add_episode` the folder is a complete dataset. :meth:`EpisodeWriter.open`
continues an existing one: its ``meta/`` is the truth, and files of an episode that was being written when the
process stopped are overwritten by the next episode.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import DataError, UsageError

__all__ = ["DATA_PATH", "VIDEO_PATH", "DatasetLayout", "EpisodeWriter", "write_data_table", "write_tasks_table"]

CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
INDEX_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
_IMAGE_STAT_FRAMES = 8  # frames per episode the image quantiles are estimated from (as LeRobot samples)


@attrs.frozen(kw_only=True)
class DatasetLayout:
    """The features of a dataset to write."""

    fps: int
    state_dim: int
    action_dim: int
    cameras: Mapping[str, tuple[int, int]]
    """``{observation.images.<cam> or observation.image: (height, width)}``; sides even (yuv420p)."""
    state_names: tuple[str, ...] | None = None
    action_names: tuple[str, ...] | None = None
    robot_type: str = "unknown"

    def features(self, codec: str) -> dict[str, Any]:
        """``info.json``'s ``features``."""
        out: dict[str, Any] = {
            "observation.state": {"dtype": "float32", "shape": [self.state_dim],
                                  "names": list(self.state_names) if self.state_names else None},
            "action": {"dtype": "float32", "shape": [self.action_dim],
                       "names": list(self.action_names) if self.action_names else None},
        }
        for key, (height, width) in self.cameras.items():
            out[key] = {
                "dtype": "video", "shape": [height, width, 3], "names": ["height", "width", "channels"],
                "info": {"video.height": height, "video.width": width, "video.codec": codec,
                         "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": self.fps,
                         "video.channels": 3, "has_audio": False},
            }
        out["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
        for name in INDEX_COLUMNS[1:]:
            out[name] = {"dtype": "int64", "shape": [1], "names": None}
        return out


def write_data_table(path: Path, columns: Sequence[Mapping[str, np.ndarray]], features: Mapping[str, Any],
                     keys: Sequence[str]) -> None:
    """Writes the frames of ``columns`` (one mapping per episode) as one parquet file, columns ``keys`` in order,
    with the HF-datasets feature metadata LeRobot's writer leaves, so ``datasets`` restores the exact types."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays, hf_features = {}, {}
    for key in keys:
        values = np.concatenate([c[key] for c in columns])
        dtype = features[key]["dtype"]
        if values.ndim == 2:
            flat = pa.array(values.reshape(-1), type=pa.float32())
            arrays[key] = pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
            hf_features[key] = {"feature": {"dtype": dtype, "_type": "Value"}, "length": values.shape[1],
                                "_type": "List"}
        else:
            arrays[key] = pa.array(values)
            hf_features[key] = {"dtype": dtype, "_type": "Value"}
    table = pa.table(arrays)
    table = table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": hf_features}})})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def write_tasks_table(path: Path, tasks: Sequence[str]) -> None:
    """Writes ``meta/tasks.parquet``: the task string as the pandas index column, as LeRobot writes it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
             "metadata": None},
            {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode", "numpy_type": "object",
             "metadata": None},
        ],
        "attributes": {}, "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.0",
    }
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "__index_level_0__": list(tasks)})
    table = table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


class EpisodeWriter:
    """Appends episodes to a LeRobot v3.0 dataset (create with :meth:`create`, continue with :meth:`open`)."""

    def __init__(self, root: Path, layout: DatasetLayout, *, codec: str | None = None) -> None:
        from embodied_data.synth.encode import pick_encoder

        self.root = Path(root)
        self.layout = layout
        self._encoder, self.codec = pick_encoder(codec)
        self.features = layout.features(self.codec)
        self._rows: list[dict[str, Any]] = []
        self._episode_stats: list[dict[str, dict[str, np.ndarray]]] = []
        self._sampled: dict[str, list[np.ndarray]] = {key: [] for key in layout.cameras}
        self._tasks: list[str] = []
        self._columns: list[dict[str, np.ndarray]] = []  # every episode's numeric columns (exact quantiles)
        self.num_frames = 0

    @property
    def num_episodes(self) -> int:
        """Episodes written so far."""
        return len(self._rows)

    @property
    def tasks(self) -> tuple[str, ...]:
        """Task strings by task index."""
        return tuple(self._tasks)

    @classmethod
    def create(cls, root: Path, layout: DatasetLayout, *, codec: str | None = None) -> EpisodeWriter:
        """A writer for a new dataset at ``root`` (absent or empty)."""
        root = Path(root)
        if root.exists() and any(root.iterdir()):
            raise UsageError(f"{root} exists and is not empty; choose another folder")
        root.mkdir(parents=True, exist_ok=True)
        return cls(root, layout, codec=codec)

    @classmethod
    def open(cls, root: Path, layout: DatasetLayout) -> EpisodeWriter:
        """A writer continuing the dataset at ``root``, which must have been written with ``layout``."""
        import pyarrow.parquet as pq

        from embodied_data.stats.frames import decode_frames_at, sample_positions

        root = Path(root)
        info = json.loads((root / "meta" / "info.json").read_text())
        codec = next((f["info"]["video.codec"] for f in info["features"].values() if f.get("dtype") == "video"),
                     None)
        writer = cls(root, layout, codec=codec)
        if info.get("fps") != layout.fps or info["features"] != writer.features:
            raise UsageError(f"{root}: its features or fps differ from what would be recorded now "
                             f"(fps {info.get('fps')} vs {layout.fps}); record into another folder")
        writer._tasks = [str(t) for t in pq.read_table(root / "meta" / "tasks.parquet")
                         .column("__index_level_0__").to_pylist()]
        rows = pq.read_table(root / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
        for row in rows[: info["total_episodes"]]:
            stats: dict[str, dict[str, np.ndarray]] = {}
            for name, value in row.items():
                if name.startswith("stats/"):
                    _, key, stat = name.split("/")
                    stats.setdefault(key, {})[stat] = np.asarray(value)
            writer._rows.append(row)
            writer._episode_stats.append(stats)
            writer._columns.append(_read_columns(root / DATA_PATH.format(chunk_index=row["data/chunk_index"],
                                                                         file_index=row["data/file_index"])))
            for key in layout.cameras:
                video = root / VIDEO_PATH.format(video_key=key, chunk_index=row[f"videos/{key}/chunk_index"],
                                                 file_index=row[f"videos/{key}/file_index"])
                times = [k / layout.fps for k in sample_positions(row["length"], _IMAGE_STAT_FRAMES)]
                frames = decode_frames_at(video, times, fps=layout.fps, episode=row["episode_index"])
                writer._sampled[key].append(frames.transpose(0, 2, 3, 1))
        writer.num_frames = sum(r["length"] for r in writer._rows)
        return writer

    def add_episode(self, *, state: np.ndarray, action: np.ndarray, frames: Mapping[str, np.ndarray],
                    task: str) -> int:
        """Writes one episode (``state`` [T, D], ``action`` [T, A], uint8 ``frames[camera]`` [T, H, W, 3], its task
        string) and rewrites the metadata; returns the episode index."""
        from embodied_data.stats.compute import compute_feature_stats, compute_image_stats
        from embodied_data.stats.frames import sample_positions
        from embodied_data.synth.encode import write_mp4

        length = int(state.shape[0])
        self._check_episode(state, action, frames, length)
        episode = self.num_episodes
        if task not in self._tasks:
            self._tasks.append(task)
        task_index = self._tasks.index(task)
        chunk, file = divmod(episode, CHUNKS_SIZE)
        steps = np.arange(length)
        columns = {
            "observation.state": np.asarray(state, np.float32), "action": np.asarray(action, np.float32),
            "timestamp": (steps / self.layout.fps).astype(np.float32), "frame_index": steps.astype(np.int64),
            "episode_index": np.full(length, episode, np.int64), "index": (self.num_frames + steps).astype(np.int64),
            "task_index": np.full(length, task_index, np.int64),
        }
        write_data_table(self.root / DATA_PATH.format(chunk_index=chunk, file_index=file), [columns],
                         self.features, keys=("observation.state", "action", *INDEX_COLUMNS))
        stats = {key: compute_feature_stats(values) for key, values in columns.items()}
        row: dict[str, Any] = {"episode_index": episode, "tasks": [task], "length": length,
                               "data/chunk_index": chunk, "data/file_index": file,
                               "dataset_from_index": self.num_frames, "dataset_to_index": self.num_frames + length}
        for key, video in frames.items():
            path = self.root / VIDEO_PATH.format(video_key=key, chunk_index=chunk, file_index=file)
            if write_mp4(path, video, fps=self.layout.fps, encoder=self._encoder) != length:
                raise DataError(f"{path}: the encoder did not write every frame")
            stats[key] = compute_image_stats(video, channels_last=True)
            self._sampled[key].append(video[sample_positions(length, _IMAGE_STAT_FRAMES)])
            row.update({f"videos/{key}/chunk_index": chunk, f"videos/{key}/file_index": file,
                        f"videos/{key}/from_timestamp": 0.0, f"videos/{key}/to_timestamp": length / self.layout.fps})
        row.update({f"stats/{key}/{name}": np.asarray(v).tolist() for key, per in stats.items()
                    for name, v in per.items()})
        row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        self._rows.append(row)
        self._episode_stats.append(stats)
        self._columns.append(columns)
        self.num_frames += length
        self._write_meta()
        return episode

    def _check_episode(self, state: np.ndarray, action: np.ndarray, frames: Mapping[str, np.ndarray],
                       length: int) -> None:
        problems = []
        if length < 1 or state.shape != (length, self.layout.state_dim):
            problems.append(f"state shape {state.shape}, expected ({length}, {self.layout.state_dim})")
        if action.shape != (length, self.layout.action_dim):
            problems.append(f"action shape {action.shape}, expected ({length}, {self.layout.action_dim})")
        if set(frames) != set(self.layout.cameras):
            problems.append(f"cameras {sorted(frames)}, expected {sorted(self.layout.cameras)}")
        for key, (height, width) in self.layout.cameras.items():
            video = frames.get(key)
            if video is not None and (video.shape != (length, height, width, 3) or video.dtype != np.uint8):
                problems.append(f"{key}: {video.dtype} {video.shape}, expected uint8 ({length}, {height}, {width}, 3)")
        if problems:
            raise DataError(f"{self.root}: episode {self.num_episodes} does not fit the dataset: "
                            + "; ".join(problems))

    def _write_meta(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from embodied_data.stats.compute import QUANTILES, aggregate_stats, compute_feature_stats, compute_image_stats
        from embodied_data.stats.io import write_stats_json

        meta = self.root / "meta"
        (meta / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(self._rows), meta / "episodes" / "chunk-000" / "file-000.parquet")
        write_tasks_table(meta / "tasks.parquet", self._tasks)
        stats = aggregate_stats(self._episode_stats)
        for key in self._columns[0]:
            exact = compute_feature_stats(np.concatenate([c[key] for c in self._columns]))
            stats[key].update({q: exact[q] for q in QUANTILES})
        for key, sampled in self._sampled.items():
            image = compute_image_stats(np.concatenate(sampled), channels_last=True)
            stats[key].update({q: image[q] for q in QUANTILES})
        write_stats_json(meta / "stats.json", stats)
        info = {
            "codebase_version": "v3.0", "robot_type": self.layout.robot_type,
            "total_episodes": self.num_episodes, "total_frames": self.num_frames, "total_tasks": len(self._tasks),
            "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200,
            "fps": self.layout.fps, "splits": {"train": f"0:{self.num_episodes}"},
            "data_path": DATA_PATH, "video_path": VIDEO_PATH, "features": self.features,
        }
        tmp = meta / "info.json.tmp"
        tmp.write_text(json.dumps(info, indent=4) + "\n")
        tmp.replace(meta / "info.json")  # last: a reader never sees episodes the other files do not have yet


def _read_columns(path: Path) -> dict[str, np.ndarray]:
    """The numeric columns of one data file (as :meth:`EpisodeWriter.add_episode` wrote them)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    out = {}
    for key in ("observation.state", "action", *INDEX_COLUMNS):
        column = table.column(key)
        out[key] = (np.stack(column.to_numpy(zero_copy_only=False)) if key in ("observation.state", "action")
                    else column.to_numpy())
    return out
