"""``embodied data inspect PATH``: what a LeRobot dataset holds and what is wrong with it, before training.

An HDF5 file or folder (robomimic / ALOHA) gets a shorter report: layout, episodes, frames and keys.

Reads the metadata (``embodied_data.lerobot.metadata``), every data parquet in full (``inspect_rows``: columns,
widths against ``info.json``, row counts, timestamp spacing) and each video's container header, then checks the
rows' timestamps against the video streams and decodes the last frame of every episode (``inspect_video``;
``deep=True`` decodes a sample of frames per episode). Problems are what would stop or corrupt training (missing,
truncated or unreadable files, each named by path; wrong counts or widths; timestamps past a video) and give exit
code 1; notes are inconsistencies readers tolerate (``video.codec`` in info.json that disagrees with the files,
absent stats).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from embodied_core.errors import DataError
from embodied_data.cli.inspect_rows import check_data_files
from embodied_data.cli.inspect_video import check_camera
from embodied_data.lerobot.metadata import format_ranges

__all__ = ["InspectReport", "inspect_dataset", "render_report"]

_DEFAULT_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


@attrs.define
class InspectReport:
    """Facts, problems (exit 1) and notes about one dataset."""

    path: str
    facts: dict[str, Any] = attrs.field(factory=dict)
    problems: list[str] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


def _check_counts(meta: Any, report: InspectReport) -> None:
    info = meta.info
    checks = (("total_episodes", len(meta.episodes)), ("total_frames", meta.total_frames),
              ("total_tasks", len(meta.tasks)))
    for key, actual in checks:
        declared = info.get(key)
        if declared is not None and int(declared) != actual:
            report.problems.append(f"meta/info.json {key} = {declared}, but the metadata lists {actual}")
    expected_from = 0
    for ep in meta.episodes.values():
        if ep.to_index - ep.from_index != ep.length:
            report.problems.append(f"episode {ep.index}: index range [{ep.from_index}, {ep.to_index}) does not "
                                   f"match its length {ep.length}")
        if ep.from_index != expected_from:
            report.problems.append(f"episode {ep.index}: starts at global index {ep.from_index}, expected "
                                   f"{expected_from} (gap or overlap with the previous episode)")
        expected_from = ep.to_index
        unknown = [t for t in ep.tasks if t not in meta.tasks.values()]
        if unknown:
            report.problems.append(f"episode {ep.index}: task(s) {unknown} are not in the tasks table")
    for split, episodes in meta.splits.items():
        outside = [e for e in episodes if e not in meta.episodes]
        if outside:
            report.problems.append(f"split {split!r} names episode(s) {format_ranges(outside)} that the metadata lacks")


def _check_stats(meta: Any, report: InspectReport) -> None:
    try:
        per_episode = meta.read_episode_stats()
        stored = meta.read_stats()
    except DataError as exc:
        report.problems.append(f"stats unreadable: {exc}")
        return
    source = ("meta/episodes stats columns" if meta.version == "v3.0" else "meta/episodes_stats.jsonl") \
        if per_episode else ("meta/stats.json" if stored else None)
    report.facts["stats"] = source or "absent"
    if source is None:
        report.notes.append("no stats files: they will be computed from the data when a model needs them")
    elif per_episode:
        lacking = [e for e in meta.episodes if e not in per_episode]
        if lacking:
            report.problems.append(f"{source} has no stats for episode(s) {format_ranges(lacking)}")


def _is_hdf5(path: Path) -> bool:
    suffixes = (".hdf5", ".h5", ".hdf")
    if path.is_file():
        return path.suffix in suffixes
    return path.is_dir() and not (path / "meta").is_dir() and any(p.suffix in suffixes for p in path.iterdir())


def _inspect_hdf5(path: Path, report: InspectReport) -> InspectReport:
    from embodied_data.hdf5.layouts import scan_hdf5

    try:
        index = scan_hdf5(path)
    except DataError as exc:
        report.problems.append(str(exc))
        return report
    report.facts.update({
        "format": f"HDF5 ({index.layout})", "fps": index.fps, "episodes": len(index.episodes),
        "frames": sum(ep.length for ep in index.episodes), "tasks": len({ep.task for ep in index.episodes}),
        "features": {k: {"dtype": "jpeg" if s.kind == "jpeg" else ("image" if s.kind == "image" else "float"),
                         "shape": list(s.shape)} for k, s in index.features.items()},
    })
    return report


def inspect_dataset(path: str | Path, *, deep: bool = False, tolerance_s: float = 1e-4) -> InspectReport:
    """Inspects the LeRobot dataset (or HDF5 file/folder) at ``path`` (see the module docstring).

    Args:
        deep: decode a sample of frames of every episode and camera, not only the last one.
        tolerance_s: how far a decoded frame may be from the requested time (the reader's default).
    """
    from embodied_data.lerobot.metadata import LeRobotMeta

    report = InspectReport(path=str(path))
    if _is_hdf5(Path(path)):
        return _inspect_hdf5(Path(path), report)
    try:
        meta = LeRobotMeta.load(path)
    except DataError as exc:
        report.problems.append(str(exc))
        return report
    report.facts.update({
        "version": meta.version, "robot_type": meta.robot_type, "fps": meta.fps, "episodes": len(meta.episodes),
        "frames": meta.total_frames, "tasks": len(meta.tasks),
        "splits": {name: format_ranges(eps) for name, eps in meta.splits.items()},
        "features": {k: {"dtype": f.dtype, "shape": list(f.shape or [])} for k, f in meta.features.items()
                     if k not in _DEFAULT_COLUMNS},
    })
    _check_counts(meta, report)
    rows = check_data_files(meta, tolerance_s=tolerance_s)
    report.problems.extend(rows.problems)
    report.facts["data_files"] = {"total": rows.total, "missing": len(rows.missing)}
    report.facts["cameras"] = {
        cam: check_camera(meta, cam, timestamps=rows.timestamps, deep=deep, tolerance_s=tolerance_s,
                          problems=report.problems, notes=report.notes)
        for cam in meta.camera_keys}
    report.facts["decoded"] = "a sample of frames per episode" if deep else "the last frame of each episode"
    _check_stats(meta, report)
    complete = [ep for ep in meta.episodes if meta.data_file(ep).is_file()
                and all(meta.video_file(ep, cam).is_file() for cam in meta.camera_keys)]
    report.facts["complete_episodes"] = format_ranges(complete)
    if len(complete) not in (0, len(meta.episodes)):
        report.notes.append(f"episodes with every file present: {format_ranges(complete)} (train on them with "
                            f"--split {format_ranges(complete).replace(' ', '')})")
    return report


def render_report(report: InspectReport) -> str:
    """Human-readable text of a report."""
    facts = report.facts
    lines = [f"dataset: {report.path}"]
    if "format" in facts:  # HDF5
        lines.append(f"format: {facts['format']}   fps: {facts['fps']:g}   episodes: {facts['episodes']}   "
                     f"frames: {facts['frames']}   tasks: {facts['tasks']}")
        lines.append("features:")
        lines.extend(f"  {key:<36} {f['dtype']:<8} {f['shape']}" for key, f in facts["features"].items())
    if "version" in facts:
        lines.append(f"version: LeRobot {facts['version']}   robot_type: {facts['robot_type']}   fps: {facts['fps']:g}")
        lines.append(f"episodes: {facts['episodes']}   frames: {facts['frames']}   tasks: {facts['tasks']}   "
                     f"splits: {', '.join(f'{k}={v}' for k, v in facts['splits'].items()) or 'none'}")
        data = facts.get("data_files", {})
        lines.append(f"data files: {data.get('total', 0)} ({data.get('missing', 0)} missing)   "
                     f"stats: {facts.get('stats', 'unknown')}")
        lines.append("features:")
        for key, feature in facts["features"].items():
            lines.append(f"  {key:<36} {feature['dtype']:<8} {feature['shape']}")
        lines.append("cameras:")
        for cam, c in facts.get("cameras", {}).items():
            codec = ", ".join(c["codec_in_files"]) or "unknown (no readable file)"
            lines.append(f"  {cam:<36} codec in files: {codec} (info.json: {c['codec_in_info']})   "
                         f"files: {c['files'] - c['files_missing']}/{c['files']}   "
                         f"episodes with video: {c['episodes_with_video']}/{facts['episodes']}")
        if facts.get("cameras"):
            lines.append(f"decoded: {facts['decoded']} (--deep: a sample of each)")
    for note in report.notes:
        lines.append(f"note: {note}")
    if report.problems:
        lines.append(f"PROBLEMS ({len(report.problems)}):")
        lines.extend(f"  - {p}" for p in report.problems)
    else:
        lines.append("no problems found")
    return "\n".join(lines)
