"""The small part of the LeRobot layout that stats need: episodes, data files and video segments.

Kept separate from the full reader so stats can be computed for a dataset directory without building a
training dataset (``embodied data inspect``, ``synth``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from embodied_core.errors import DataError

__all__ = ["EpisodeRef", "Layout", "load_layout"]

_VERSIONS = ("v2.0", "v2.1", "v3.0")


@attrs.frozen
class EpisodeRef:
    """Where one episode lives: its length, data file, and per camera a video file and start time."""

    index: int
    length: int
    data_file: Path
    videos: dict[str, tuple[Path, float]]


@attrs.frozen
class Layout:
    """Version, features, fps and episodes of a LeRobot dataset directory."""

    root: Path
    version: str
    fps: float
    features: dict[str, dict[str, Any]]
    episodes: dict[int, EpisodeRef]

    def keys_of(self, *dtypes: str) -> list[str]:
        """Feature keys whose dtype is one of ``dtypes``."""
        return [k for k, f in self.features.items() if f.get("dtype") in dtypes]

    def numeric_keys(self) -> list[str]:
        """Keys of numeric (non-image, non-string) features."""
        return [k for k, f in self.features.items() if f.get("dtype") not in ("video", "image", "string")]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None


def _v2_episodes(root: Path, info: dict[str, Any]) -> dict[int, EpisodeRef]:
    chunks_size = int(info.get("chunks_size", 1000))
    video_keys = [k for k, f in info["features"].items() if f.get("dtype") == "video"]
    episodes = {}
    for row in _read_jsonl(root / "meta" / "episodes.jsonl"):
        index = int(row["episode_index"])
        chunk = index // chunks_size
        data_file = root / info["data_path"].format(episode_chunk=chunk, episode_index=index)
        videos = {}
        for key in video_keys:
            rel = info["video_path"].format(episode_chunk=chunk, video_key=key, episode_index=index)
            videos[key] = (root / rel, 0.0)
        episodes[index] = EpisodeRef(index, int(row["length"]), data_file, videos)
    return episodes


def _v3_episodes(root: Path, info: dict[str, Any]) -> dict[int, EpisodeRef]:
    import pyarrow.parquet as pq

    files = sorted((root / "meta" / "episodes").glob("**/*.parquet"))
    if not files:
        raise DataError(f"{root}: no meta/episodes/**/*.parquet (a v3.0 dataset lists its episodes there)")
    video_keys = [k for k, f in info["features"].items() if f.get("dtype") == "video"]
    episodes = {}
    for file in files:
        names = pq.read_schema(file).names
        wanted = [n for n in names if not n.startswith("stats/")]
        for row in pq.read_table(file, columns=wanted).to_pylist():
            index = int(row["episode_index"])
            data_file = root / info["data_path"].format(chunk_index=row["data/chunk_index"],
                                                        file_index=row["data/file_index"])
            videos = {}
            for key in video_keys:
                rel = info["video_path"].format(video_key=key, chunk_index=row[f"videos/{key}/chunk_index"],
                                                file_index=row[f"videos/{key}/file_index"])
                videos[key] = (root / rel, float(row[f"videos/{key}/from_timestamp"]))
            episodes[index] = EpisodeRef(index, int(row["length"]), data_file, videos)
    return episodes


def load_layout(root: Path) -> Layout:
    """Reads ``meta/info.json`` and the episode table of a v2.0, v2.1 or v3.0 dataset."""
    root = Path(root)
    info_path = root / "meta" / "info.json"
    try:
        info = json.loads(info_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read {info_path}: {exc} (is {root} a LeRobot dataset?)") from None
    version = info.get("codebase_version")
    if version not in _VERSIONS:
        raise DataError(f"{info_path}: codebase_version {version!r} is not one of {', '.join(_VERSIONS)}")
    try:
        episodes = _v3_episodes(root, info) if version == "v3.0" else _v2_episodes(root, info)
    except KeyError as exc:
        raise DataError(f"{root}: metadata lacks {exc} (needed to locate episode files)") from None
    return Layout(root=root, version=version, fps=float(info["fps"]), features=info["features"], episodes=episodes)
