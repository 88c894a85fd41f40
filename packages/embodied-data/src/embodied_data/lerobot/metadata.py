"""Metadata of a LeRobot dataset on disk (v2.0, v2.1, v3.0): ``meta/`` plus the paths it implies.

Usage::

    meta = LeRobotMeta.load("/data/my_dataset", expected_version="v3.0")
    meta.version, meta.fps, meta.robot_type, meta.features, meta.camera_keys
    meta.episodes[3].length, meta.episodes[3].from_index     # global frame index range [from, to)
    meta.data_file(3), meta.video_file(3, "observation.images.front"), meta.video_from_timestamp(3, cam)
    meta.tasks[0], meta.episodes_in_split("train"), meta.read_stats(), meta.read_episode_stats()

Layouts:
    v2.0 / v2.1: ``meta/episodes.jsonl`` (episode_index, tasks, length), ``meta/tasks.jsonl`` (task_index, task),
        one parquet and one mp4 per episode under ``chunk-{episode_chunk}`` (episode // chunks_size). v2.1 adds
        ``meta/episodes_stats.jsonl``; v2.0 has a global ``meta/stats.json``.
    v3.0: ``meta/episodes/chunk-*/file-*.parquet`` with per-episode file indices, global ``dataset_from_index``
        / ``dataset_to_index`` and, per camera, the mp4 file and ``from_timestamp`` of the episode inside it;
        ``meta/tasks.parquet`` (the task string in ``task`` or in the pandas index ``__index_level_0__``).
Nothing here opens a data parquet or a video: loading metadata stays cheap (``embodied data inspect``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import DataError, UsageError, did_you_mean
from embodied_data.lerobot.features import SUPPORTED_VERSIONS, FeatureInfo, parse_features, parse_splits
from embodied_data.parquet import read_schema, read_table

__all__ = ["EpisodeInfo", "LeRobotMeta", "VideoSegment", "format_ranges", "read_version"]


@attrs.frozen(kw_only=True)
class VideoSegment:
    """Where one episode of one camera lives: a file and the episode's start time inside it."""

    chunk_index: int
    file_index: int
    from_timestamp: float = 0.0
    to_timestamp: float | None = None


@attrs.frozen(kw_only=True)
class EpisodeInfo:
    """One episode: its length, global frame index range ``[from_index, to_index)``, tasks and files.

    ``data_chunk``/``data_file`` locate the data parquet (v3.0; for v2.x they are the chunk and the episode
    index); ``videos`` maps camera key -> :class:`VideoSegment`.
    """

    index: int
    length: int
    from_index: int
    to_index: int
    tasks: tuple[str, ...] = ()
    data_chunk: int = 0
    data_file: int = 0
    videos: Mapping[str, VideoSegment] = attrs.field(factory=dict)


def _read_json(path: Path) -> Any:
    try:
        with path.open() as f:
            return json.load(f)
    except FileNotFoundError:
        raise DataError(f"{path}: missing (is this a LeRobot dataset root?)") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise DataError(f"{path}: missing") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{number}: not valid JSON ({exc})") from None
    return rows


def read_version(root: str | Path) -> str:
    """The ``codebase_version`` of the dataset at ``root`` (e.g. ``"v2.1"``)."""
    info = _read_json(Path(root) / "meta" / "info.json")
    return str(info.get("codebase_version", "<missing>"))


@attrs.define(kw_only=True)
class LeRobotMeta:
    """Parsed ``meta/`` of a LeRobot dataset. Build it with :meth:`load`.

    Attributes:
        root: dataset root directory.
        info: the raw ``info.json`` mapping.
        version: ``"v2.0"``, ``"v2.1"`` or ``"v3.0"``.
        fps: frames per second of the data (and of the videos).
        robot_type: ``info.json``'s ``robot_type`` (None when absent).
        features: feature key -> :class:`FeatureInfo`, in info.json order.
        episodes: episode index -> :class:`EpisodeInfo`, sorted by index.
        tasks: task index -> task string.
        splits: split name -> episode indices.
    """

    root: Path
    info: Mapping[str, Any]
    version: str
    fps: float
    robot_type: str | None
    features: dict[str, FeatureInfo]
    episodes: dict[int, EpisodeInfo]
    tasks: dict[int, str]
    splits: dict[str, list[int]]

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, root: str | Path, *, expected_version: str | None = None) -> LeRobotMeta:
        """Reads ``root/meta``; with ``expected_version``, a different on-disk version is a UsageError."""
        root = Path(root)
        if not root.is_dir():
            raise DataError(f"dataset path {root} does not exist or is not a directory")
        info_path = root / "meta" / "info.json"
        info = _read_json(info_path)
        version = str(info.get("codebase_version", "<missing>"))
        if version not in SUPPORTED_VERSIONS:
            raise DataError(f"{info_path}: codebase_version {version!r} is not supported "
                            f"(supported: {', '.join(SUPPORTED_VERSIONS)})")
        if expected_version is not None and expected_version != version:
            raise UsageError(f"--lerobotdataset-version {expected_version} does not match the dataset: {root} is "
                             f"LeRobot {version} (codebase_version in {info_path}); pass "
                             f"--lerobotdataset-version {version}")
        for key in ("fps", "data_path"):
            if key not in info:
                raise DataError(f"{info_path}: required key {key!r} is missing")
        features = parse_features(info.get("features"), where=str(info_path))
        if any(f.is_video for f in features.values()) and not info.get("video_path"):
            raise DataError(f"{info_path}: video features are declared but 'video_path' is missing")
        video_keys = [k for k, f in features.items() if f.is_video]
        if version == "v3.0":
            episodes = _load_episodes_v30(root, video_keys)
            tasks = _load_tasks_parquet(root / "meta" / "tasks.parquet")
        else:
            episodes = _load_episodes_v2(root, int(info.get("chunks_size", 1000)), video_keys)
            tasks = _load_tasks_jsonl(root / "meta" / "tasks.jsonl")
        return cls(root=root, info=info, version=version, fps=float(info["fps"]),
                   robot_type=info.get("robot_type"), features=features, episodes=episodes, tasks=tasks,
                   splits=parse_splits(info.get("splits"), where=str(info_path)))

    # ------------------------------------------------------------------ derived views
    @property
    def camera_keys(self) -> list[str]:
        """Keys of the video features (in info.json order)."""
        return [k for k, f in self.features.items() if f.is_video]

    @property
    def image_keys(self) -> list[str]:
        """Keys of camera features stored as images inside the data parquet."""
        return [k for k, f in self.features.items() if f.is_image]

    @property
    def total_frames(self) -> int:
        """Number of frames over all episodes listed in the metadata."""
        return sum(ep.length for ep in self.episodes.values())

    def episodes_in_split(self, split: str) -> list[int]:
        """Episode indices of ``split`` (from info.json ``splits``); unknown split -> UsageError."""
        if split not in self.splits:
            choices = ", ".join(self.splits) or "none declared"
            raise UsageError(f"--split {split!r}: not a split of {self.root} (splits in meta/info.json: {choices})"
                             f"{did_you_mean(split, self.splits)}")
        return [ep for ep in self.splits[split] if ep in self.episodes]

    def data_file(self, episode: int) -> Path:
        """Path of the parquet that holds ``episode``'s rows (shared by several episodes in v3.0)."""
        ep = self._episode(episode)
        template = str(self.info["data_path"])
        if self.version == "v3.0":
            rel = template.format(chunk_index=ep.data_chunk, file_index=ep.data_file)
        else:
            rel = template.format(episode_chunk=ep.data_chunk, episode_index=ep.index)
        return self.root / rel

    def video_file(self, episode: int, camera: str) -> Path:
        """Path of the mp4 that holds ``camera``'s frames of ``episode``."""
        ep = self._episode(episode)
        if camera not in self.features or not self.features[camera].is_video:
            raise DataError(f"{self.root}: {camera!r} is not a video feature (video features: {self.camera_keys})")
        template = str(self.info["video_path"])
        if self.version == "v3.0":
            seg = ep.videos.get(camera)
            if seg is None:
                raise DataError(f"{self.root}: episode {episode} has no video entry for {camera!r} in meta/episodes")
            rel = template.format(video_key=camera, chunk_index=seg.chunk_index, file_index=seg.file_index)
        else:
            rel = template.format(video_key=camera, episode_chunk=ep.data_chunk, episode_index=ep.index)
        return self.root / rel

    def video_from_timestamp(self, episode: int, camera: str) -> float:
        """Start time (s) of ``episode`` inside its ``camera`` mp4: 0 in v2.x, ``from_timestamp`` in v3.0."""
        seg = self._episode(episode).videos.get(camera)
        return seg.from_timestamp if seg is not None else 0.0

    def _episode(self, episode: int) -> EpisodeInfo:
        try:
            return self.episodes[episode]
        except KeyError:
            raise DataError(f"{self.root}: episode {episode} is not in the metadata "
                            f"(episodes {format_ranges(self.episodes)})") from None

    # ------------------------------------------------------------------ stats
    def read_stats(self) -> dict[str, dict[str, np.ndarray]] | None:
        """Global stats from ``meta/stats.json`` (feature -> stat name -> array), or None when absent."""
        path = self.root / "meta" / "stats.json"
        if not path.exists():
            return None
        return _stats_arrays(_read_json(path))

    def read_episode_stats(self) -> dict[int, dict[str, dict[str, np.ndarray]]]:
        """Per-episode stats: v2.1 ``episodes_stats.jsonl`` or v3.0 ``stats/<feature>/<stat>`` columns; {} if none."""
        if self.version == "v3.0":
            return _episode_stats_v30(self.root)
        path = self.root / "meta" / "episodes_stats.jsonl"
        if not path.exists():
            return {}
        return {int(row["episode_index"]): _stats_arrays(row["stats"]) for row in _read_jsonl(path)}


def format_ranges(indices: Any) -> str:
    """Episode (or frame) indices in any order, repeats allowed -> ``"0-2, 5-6"`` (for messages and reports)."""
    values = sorted(set(indices))
    if not values:
        return "none"
    parts, start, prev = [], values[0], values[0]
    for v in [*values[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(f"{start}-{prev}" if prev != start else str(start))
        if v is not None:
            start = prev = v
    return ", ".join(parts)


def _stats_arrays(raw: Mapping[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    return {feat: {name: np.asarray(value) for name, value in stats.items()} for feat, stats in raw.items()}


def _load_episodes_v2(root: Path, chunks_size: int, video_keys: list[str]) -> dict[int, EpisodeInfo]:
    rows = sorted(_read_jsonl(root / "meta" / "episodes.jsonl"), key=lambda r: int(r["episode_index"]))
    episodes: dict[int, EpisodeInfo] = {}
    start = 0  # v2.x stores no global index: episodes are laid out in episode order
    for row in rows:
        index, length = int(row["episode_index"]), int(row["length"])
        chunk = index // chunks_size
        episodes[index] = EpisodeInfo(
            index=index, length=length, from_index=start, to_index=start + length,
            tasks=tuple(row.get("tasks") or ()), data_chunk=chunk, data_file=index,
            videos={cam: VideoSegment(chunk_index=chunk, file_index=index) for cam in video_keys})
        start += length
    return episodes


def _episode_parquet_files(root: Path) -> list[Path]:
    files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not files:
        raise DataError(f"{root / 'meta' / 'episodes'}: no chunk-*/file-*.parquet files (LeRobot v3.0 episodes)")
    return files


def _load_episodes_v30(root: Path, video_keys: list[str]) -> dict[int, EpisodeInfo]:
    episodes: dict[int, EpisodeInfo] = {}
    for path in _episode_parquet_files(root):
        names = read_schema(path).names
        required = ("episode_index", "length", "data/chunk_index", "data/file_index", "dataset_from_index",
                    "dataset_to_index")
        missing = [c for c in required if c not in names]
        if missing:
            raise DataError(f"{path}: missing columns {missing}")
        wanted = [c for c in names if not c.startswith("stats/")]  # stats are read only when asked for
        for row in read_table(path, columns=wanted).to_pylist():
            videos = {}
            for cam in video_keys:
                prefix = f"videos/{cam}/"
                if prefix + "file_index" in row:
                    to_ts = row.get(prefix + "to_timestamp")
                    videos[cam] = VideoSegment(chunk_index=int(row[prefix + "chunk_index"]),
                                               file_index=int(row[prefix + "file_index"]),
                                               from_timestamp=float(row.get(prefix + "from_timestamp") or 0.0),
                                               to_timestamp=None if to_ts is None else float(to_ts))
            index = int(row["episode_index"])
            episodes[index] = EpisodeInfo(
                index=index, length=int(row["length"]), from_index=int(row["dataset_from_index"]),
                to_index=int(row["dataset_to_index"]), tasks=tuple(row.get("tasks") or ()),
                data_chunk=int(row["data/chunk_index"]), data_file=int(row["data/file_index"]), videos=videos)
    return dict(sorted(episodes.items()))


def _load_tasks_jsonl(path: Path) -> dict[int, str]:
    return {int(row["task_index"]): str(row["task"]) for row in _read_jsonl(path)}


def _load_tasks_parquet(path: Path) -> dict[int, str]:
    if not path.exists():
        raise DataError(f"{path}: missing (LeRobot v3.0 tasks table)")
    table = read_table(path)
    # lerobot writes the task string as the pandas index, which pyarrow names __index_level_0__
    column = next((c for c in ("task", "__index_level_0__") if c in table.column_names), None)
    if column is None or "task_index" not in table.column_names:
        raise DataError(f"{path}: expected columns 'task_index' and 'task' (or '__index_level_0__'), "
                        f"found {table.column_names}")
    indices, texts = table.column("task_index").to_pylist(), table.column(column).to_pylist()
    return {int(i): str(t) for i, t in zip(indices, texts, strict=True)}


def _episode_stats_v30(root: Path) -> dict[int, dict[str, dict[str, np.ndarray]]]:
    out: dict[int, dict[str, dict[str, np.ndarray]]] = {}
    for path in _episode_parquet_files(root):
        names = read_schema(path).names
        stat_cols = [c for c in names if c.startswith("stats/")]
        if not stat_cols:
            continue
        table = read_table(path, columns=["episode_index", *stat_cols])
        columns = {c: table.column(c).to_pylist() for c in stat_cols}
        for row, ep in enumerate(table.column("episode_index").to_pylist()):
            stats: dict[str, dict[str, np.ndarray]] = {}
            for col, values in columns.items():
                feature, _, stat = col[len("stats/"):].rpartition("/")
                if values[row] is not None:
                    stats.setdefault(feature, {})[stat] = np.asarray(values[row])
            out[int(ep)] = stats
    return out
