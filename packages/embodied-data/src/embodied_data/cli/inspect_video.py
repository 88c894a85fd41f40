"""``embodied data inspect``: the checks of one camera's video files.

Per file: present, openable (container header probed with PyAV: codec, size, duration), and long enough for
the timestamps of its episodes (``from_timestamp`` + the data rows' ``timestamp``, as the reader queries them).
Then frames are decoded with PyAV (no torch), by default the last frame of each episode's range, which finds a
file cut short behind an intact header; with ``deep`` a sample of frames spread over each episode. A decoded
frame must lie within ``tolerance_s`` of the requested time, the reader's rule.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from embodied_core.errors import DataError
from embodied_data.lerobot.metadata import format_ranges

__all__ = ["DEEP_FRAMES_PER_EPISODE", "check_camera", "frame_times", "probe_video"]

DEEP_FRAMES_PER_EPISODE = 16
"""Frames decoded per episode and camera by ``inspect --deep`` (spread evenly, the last one included)."""

_SEEK_AHEAD_FRAMES = 4
"""A target more frames ahead than this of the last decoded frame is reached by seeking to its keyframe, not by
decoding through (decoding costs milliseconds per frame; keyframes are usually 2-12 frames apart)."""


def probe_video(path: Path) -> dict[str, Any]:
    """Codec, width, height and duration (s, or None) of the first video stream, from the container header."""
    import av

    from embodied_data.video.probe import normalize_codec

    with av.open(str(path)) as container:
        if not container.streams.video:
            raise DataError(f"{path}: no video stream")
        stream = container.streams.video[0]
        if stream.duration is not None:
            duration = float(stream.duration * stream.time_base)
        elif container.duration is not None:
            duration = container.duration / 1_000_000
        else:
            duration = None
        return {"codec": normalize_codec(stream.codec_context.codec.name), "width": stream.codec_context.width,
                "height": stream.codec_context.height, "duration": duration}


def frame_times(path: Path, targets: list[float], *, half_period: float) -> list[float]:
    """Presentation times of the frames shown at ``targets`` (seconds, ascending), decoding each with PyAV.

    Raises:
        DataError: the stream ends before a target, or FFmpeg fails to demux or decode (truncated, corrupt).
    """
    import av

    out: list[float] = []
    seek_ahead = _SEEK_AHEAD_FRAMES * 2 * half_period
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            decoder: Any = None
            last = -np.inf

            def seek(target: float) -> Any:
                container.seek(max(0, int(target / stream.time_base)), stream=stream, backward=True)
                return container.decode(stream)

            for target in targets:
                if decoder is None or target < last - half_period or target > last + seek_ahead:
                    decoder = seek(target)
                    first = next(decoder, None)
                    if first is not None and float(first.time) > target + half_period:
                        decoder = seek(max(target - 1.0, 0.0))  # the seek landed after the target: back off once
                        first = next(decoder, None)
                    if first is None:
                        raise DataError(f"{path}: no frame at t={target:.6f}s (nothing decodes after seeking there)")
                    last = float(first.time)
                while last < target - half_period:
                    frame = next(decoder, None)
                    if frame is None:
                        raise DataError(f"{path}: no frame at t={target:.6f}s (the stream ends at {last:.6f}s)")
                    last = float(frame.time)
                out.append(last)
    except (av.FFmpegError, OSError, ValueError) as exc:
        raise DataError(f"{path}: decoding failed near t={targets[min(len(out), len(targets) - 1)]:.6f}s "
                        f"({exc})") from None
    return out


def _queries(meta: Any, episode: Any, camera: str, timestamps: dict[int, np.ndarray]) -> np.ndarray:
    """The times the reader asks the video for: episode start in the file + the rows' timestamps."""
    ts = timestamps.get(episode.index)
    if ts is None or len(ts) != episode.length:
        ts = np.arange(episode.length, dtype=np.float64) / meta.fps
    return meta.video_from_timestamp(episode.index, camera) + ts


def _decode_targets(queries: np.ndarray, deep: bool) -> list[float]:
    from embodied_data.stats.frames import sample_positions

    positions = sample_positions(len(queries), DEEP_FRAMES_PER_EPISODE) if deep else []
    return sorted({float(queries[p]) for p in [*positions, len(queries) - 1]})


def _check_frames(path: Path, camera: str, episode: int, targets: list[float], *, fps: float, tolerance_s: float,
                  problems: list[str]) -> None:
    try:
        times = frame_times(path, targets, half_period=0.5 / fps)
    except DataError as exc:
        problems.append(f"{camera}: episode {episode}: {exc}; the file is truncated or damaged, or the timestamps "
                        "point past its frames")
        return
    for target, pts in zip(targets, times, strict=True):
        if abs(pts - target) > tolerance_s:
            problems.append(f"{camera}: {path}: episode {episode}: the frame nearest t={target:.6f}s has pts "
                            f"{pts:.6f}s, {abs(pts - target):.2e}s away (> tolerance_s={tolerance_s}); the video "
                            "and the parquet timestamps disagree")
            return


def _check_file(meta: Any, camera: str, path: Path, episodes: list[Any], probe: dict[str, Any], *,
                timestamps: dict[int, np.ndarray], deep: bool, tolerance_s: float, problems: list[str]) -> None:
    duration = probe["duration"]
    late: list[tuple[int, float, float]] = []
    for ep in episodes:
        queries = _queries(meta, ep, camera, timestamps)
        first, last = float(queries.min()), float(queries.max())
        if first < -tolerance_s:
            problems.append(f"{camera}: {path}: episode {ep.index} asks for frames from t={first:.6f}s, before the "
                            "start of the file (check the timestamp column and from_timestamp)")
        elif duration is not None and duration + 1.0 / meta.fps < last - tolerance_s:
            late.append((ep.index, first, last))
        else:
            _check_frames(path, camera, ep.index, _decode_targets(queries, deep), fps=meta.fps,
                          tolerance_s=tolerance_s, problems=problems)
    if late:
        spans = ", ".join(f"{e}: {a:.3f}-{b:.3f}s" for e, a, b in late[:5]) + (" ..." if len(late) > 5 else "")
        late_episodes = format_ranges(e for e, _, _ in late)
        problems.append(f"{camera}: {path} lasts {duration:.3f}s, but episode(s) {late_episodes} need frames up to "
                        f"{max(b for _, _, b in late):.3f}s ({spans}; from_timestamp + the data rows' timestamp)")


def check_camera(meta: Any, camera: str, *, timestamps: dict[int, np.ndarray], deep: bool, tolerance_s: float,
                 problems: list[str], notes: list[str]) -> dict[str, Any]:
    """Checks every video file of ``camera`` (see the module docstring); returns the camera's facts."""
    feature = meta.features[camera]
    declared_codec = feature.video_info.get("video.codec")
    by_file: dict[Path, list[Any]] = defaultdict(list)
    for ep in meta.episodes.values():
        by_file[meta.video_file(ep.index, camera)].append(ep)
    missing: dict[Path, list[int]] = {}
    codecs: set[str] = set()
    sizes: set[tuple[int, int]] = set()
    for path, episodes in by_file.items():
        if not path.is_file():
            missing[path] = [ep.index for ep in episodes]
            continue
        try:
            probe = probe_video(path)
        except Exception as exc:  # PyAV raises FFmpeg errors of many kinds for broken files
            problems.append(f"{camera}: {path} cannot be opened ({exc})")
            continue
        codecs.add(probe["codec"])
        sizes.add((probe["height"], probe["width"]))
        _check_file(meta, camera, path, episodes, probe, timestamps=timestamps, deep=deep, tolerance_s=tolerance_s,
                    problems=problems)
    if missing:
        lost = [e for eps in missing.values() for e in eps]
        problems.append(f"{camera}: video files missing for {len(lost)} episode(s): {format_ranges(lost)}: "
                        f"{', '.join(str(p) for p in missing)}")
    shape = tuple(feature.shape[:2]) if feature.shape and len(feature.shape) >= 2 else None
    for size in sorted(sizes):
        if shape is not None and size != shape:
            problems.append(f"{camera}: files are {size[1]}x{size[0]} (WxH), info.json declares {shape[1]}x{shape[0]}")
    if declared_codec and codecs and {declared_codec} != codecs:
        notes.append(f"{camera}: info.json says video.codec {declared_codec!r}, the files are "
                     f"{', '.join(sorted(codecs))} (readers use the files' codec)")
    return {"codec_in_files": sorted(codecs), "codec_in_info": declared_codec, "files": len(by_file),
            "files_missing": len(missing), "episodes_with_video": len(meta.episodes) - sum(map(len, missing.values())),
            "shape": list(feature.shape or [])}
