"""``LeRobotDataset``: a map-style dataset over LeRobot v2.0 / v2.1 / v3.0 data on disk.

Sample keys (DESIGN 5): every non-camera feature of the data parquet (``observation.state``, ``action``, ...,
``timestamp``, ``frame_index``, ``episode_index``, ``index``, ``task_index``), the selected cameras, ``task``
(the string of the frame's own task index, so tasks that change inside an episode are right), and
``<key>_is_pad`` for every key queried with ``delta_timestamps``.

Shapes: a key without time offsets has the feature's shape (``[D]``, 0-d for scalar columns, ``[C, H, W]`` uint8
for cameras); a key with T offsets gets a leading ``T`` (``[T, D]``, ``[T, C, H, W]``), also when T == 1 and when
all T frames are the same clamped edge frame. Frames are uint8 RGB (LeRobot returns ``u8.float() / 255``;
normalizing is left to the model's transform, after the uint8 crossed the worker boundary).

Batches: :meth:`LeRobotDataset.decode_batch` decodes the video frames that a batch of samples reads together,
one backend call per file with the batch's timestamps sorted and deduplicated (overlapping windows of a video
model share their frames), on the decoders the backend keeps open across batches; inside it each sample is built
as :meth:`~LeRobotDataset.item` always builds it, taking its frames from the batch (the same values and memory
layout as a per-sample decode). ``ResumableLoader`` and :meth:`~LeRobotDataset.__getitems__` (a DataLoader's
batched fetch) use it.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from embodied_core.errors import DataError, UsageError
from embodied_core.protocols import DatasetFeature
from embodied_data.feature_maps import FeatureMap, mapped_features, mapped_stats
from embodied_data.lerobot.deltas import query_indices, to_frame_offsets
from embodied_data.lerobot.features import DEFAULT_COLUMNS
from embodied_data.lerobot.metadata import LeRobotMeta, format_ranges
from embodied_data.lerobot.table import EpisodeTable, load_table
from embodied_data.strategies.base import SampleIndex, SampleIndexBuilder, SampleQuery
from embodied_data.video.backends import make_backend
from embodied_data.video.base import VideoBackend

__all__ = ["DECODER_CACHE_MAX", "LeRobotDataset", "select_episodes"]

Sample = dict[str, Any]

DECODER_CACHE_MAX = 16
"""The most video decoders a dataset keeps open per process by default (``decoder_cache_size=None``): one per
video file it reads, up to this many. A cache smaller than the files a shuffled pass visits closes and reopens
decoders all the time (10 AV1 files read through 8 decoders: 39 opens in a 200-item pass, ~1.8 ms each); an
open decoder holds ~0.1-1.3 MiB (MPEG-4 / AV1 at 640x480, one FFmpeg thread), and every dataset of a mixture has
its own cache, hence the bound."""


class _DecodedFile:
    """The frames of one video file that a batch reads (:meth:`LeRobotDataset.decode_batch`).

    Args:
        frames: ``[N, C, H, W]`` uint8, one per distinct timestamp, in ``times`` order (sorted).
        pts: the presentation time of each frame.
        times: the distinct timestamps, sorted.
        shared: the timestamps that more than one of the batch's samples read.
    """

    __slots__ = ("frames", "pts", "shared", "slots")

    def __init__(self, frames: torch.Tensor, pts: list[float], times: list[float], shared: set[float]) -> None:
        self.frames = frames
        self.pts = pts
        self.slots = {t: i for i, t in enumerate(times)}
        self.shared = shared

    def take(self, times: Sequence[float]) -> tuple[torch.Tensor, list[float]] | None:
        """The frames at ``times``, laid out like the backend's own output (same strides); None if one is missing.

        Frames no other sample reads, in consecutive slots (a window, a single frame), are a view of the batch's
        tensor (no copy); others are copied, so that every sample owns its frames (a transform may change them
        in place).
        """
        try:
            slots = [self.slots[t] for t in times]
        except KeyError:
            return None
        pts = [self.pts[s] for s in slots]
        first = slots[0]
        frames = self.frames
        if slots == list(range(first, first + len(slots))) and not any(t in self.shared for t in times):
            return frames[first:first + len(slots)], pts
        index = torch.tensor(slots, dtype=torch.int64)
        if frames.dim() == 4 and not frames.is_contiguous() and frames.is_contiguous(
                memory_format=torch.channels_last):
            # torchcodec hands out NCHW views of NHWC frames: keep that layout (strides as a per-sample decode)
            return frames.permute(0, 2, 3, 1).index_select(0, index).permute(0, 3, 1, 2), pts
        return frames.index_select(0, index), pts


def select_episodes(meta: LeRobotMeta, *, episodes: Sequence[int] | None, split: str | None) -> list[int]:
    """The episodes to read: ``episodes`` (checked against the metadata), else the split's, else all.

    With both, every listed episode must belong to the split.
    """
    in_split = meta.episodes_in_split(split) if split is not None else list(meta.episodes)
    if episodes is None:
        return sorted(in_split)
    unknown = sorted(set(episodes) - set(meta.episodes))
    if unknown:
        raise UsageError(f"episodes {unknown} are not in {meta.root} (episodes {format_ranges(meta.episodes)})")
    outside = sorted(set(episodes) - set(in_split))
    if outside:
        raise UsageError(f"episodes {outside} are not in split {split!r} of {meta.root} "
                         f"(split episodes {format_ranges(in_split)})")
    return sorted(set(episodes))


class LeRobotDataset(Dataset):
    """Frames of a LeRobot dataset with LeRobot's delta-timestamp semantics.

    Args:
        root: dataset directory (holding ``meta/info.json``).
        episodes: episode indices to read (a partially downloaded dataset: only those need data and videos).
        split: a split of ``info.json``'s ``splits``; None reads every episode (or ``episodes``).
        delta_timestamps: key -> offsets in seconds from the current frame (``{"action": [0, 1/fps, ...]}``).
        tolerance_s: how far a frame's timestamp may be from the requested one (parquet timestamps, offsets on
            the fps grid, and decoded video pts).
        video_backend: a backend name of ``embodied.video_backends`` or a :class:`VideoBackend`.
        camera_keys: cameras to return (None: every camera of the dataset). Only these are decoded.
        expected_version: the on-disk version the caller expects (``--lerobotdataset-version``).
        transform: applied to each sample dict last (strategies, robot layouts).
        feature_maps: what ``transform`` does to the stats and feature metadata, in the order it runs (see
            :mod:`embodied_data.feature_maps`); empty when it keeps the stored keys and dimensions.
        decoder_cache_size: open decoders kept per worker; None: one per video file the dataset reads, up to
            :data:`DECODER_CACHE_MAX`.
        meta: an already loaded :class:`LeRobotMeta` of ``root``.
        sample_index: a strategy's builder of the sample -> rows map (``DatasetPlan.sample_index``); None makes
            every frame a sample.
    """

    def __init__(self, root: str | Path, *, episodes: Sequence[int] | None = None, split: str | None = None,
                 delta_timestamps: Mapping[str, Sequence[float]] | None = None, tolerance_s: float = 1e-4,
                 video_backend: str | VideoBackend = "torchcodec", camera_keys: Sequence[str] | None = None,
                 expected_version: str | None = None, transform: Callable[[Sample], Sample] | None = None,
                 feature_maps: Sequence[FeatureMap] = (), decoder_cache_size: int | None = None,
                 meta: LeRobotMeta | None = None, sample_index: SampleIndexBuilder | None = None) -> None:
        self.meta = meta if meta is not None else LeRobotMeta.load(root, expected_version=expected_version)
        self.root = self.meta.root
        self.tolerance_s = float(tolerance_s)
        self.transform = transform
        self.feature_maps = tuple(feature_maps)
        self.camera_keys = self._check_cameras(camera_keys)
        self.data_keys = [k for k, f in self.meta.features.items() if not (f.is_video or f.is_image)]
        self.offsets = to_frame_offsets(delta_timestamps, fps=self.meta.fps, tolerance_s=self.tolerance_s,
                                        features=[*self.data_keys, *self.camera_keys])
        self.delta_timestamps = {k: list(v) for k, v in (delta_timestamps or {}).items()}
        self.episodes = select_episodes(self.meta, episodes=episodes, split=split)
        if not self.episodes:
            raise UsageError(f"{self.root}: no episodes selected (split {split!r}, episodes {episodes})")
        self._video_paths = self._check_videos()  # before the parquet read: a missing file fails fast
        self._video_cameras = [k for k in self.camera_keys if self.meta.features[k].is_video]
        self._batch: dict[Path, _DecodedFile] | None = None  # the frames of the batch being built
        if decoder_cache_size is None:
            decoder_cache_size = max(1, min(len(set(self._video_paths.values())), DECODER_CACHE_MAX))
        self.backend = make_backend(video_backend, cache_size=decoder_cache_size) if isinstance(
            video_backend, str) else video_backend
        image_keys = [k for k in self.camera_keys if self.meta.features[k].is_image]
        columns = list(dict.fromkeys([*self.data_keys, *DEFAULT_COLUMNS, *image_keys]))
        self.table: EpisodeTable = load_table(self.meta, self.episodes, columns=columns)
        self._check_timestamps()
        self.index: SampleIndex | None = None if sample_index is None else sample_index(self.table, self.meta)
        if self.index is not None and len(self.index) == 0:
            raise DataError(f"{self.root}: the strategy's sample index has no samples in the selected episodes "
                            f"{format_ranges(self.episodes)} (are the episodes shorter than its window?)")

    # ---------------------------------------------------------------- checks at construction
    def _check_cameras(self, camera_keys: Sequence[str] | None) -> list[str]:
        cameras = [k for k, f in self.meta.features.items() if f.is_video or f.is_image]
        if camera_keys is None:
            return cameras
        unknown = [k for k in camera_keys if k not in cameras]
        if unknown:
            raise UsageError(f"camera keys {unknown} are not cameras of {self.root} (cameras: {', '.join(cameras)})")
        return list(camera_keys)

    def _check_videos(self) -> dict[tuple[str, int], Path]:
        paths: dict[tuple[str, int], Path] = {}
        missing: list[str] = []
        for cam in self.camera_keys:
            if not self.meta.features[cam].is_video:
                continue
            for ep in self.episodes:
                path = self.meta.video_file(ep, cam)
                paths[(cam, ep)] = path
                if not path.exists():
                    missing.append(f"episode {ep}: {path}")
        if missing:
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            raise DataError(f"{self.root}: {len(missing)} video file(s) of the selected episodes are missing: "
                            f"{'; '.join(missing[:5])}{more}. Select the episodes that were downloaded "
                            f"(episodes=[...]) or fetch the missing files")
        return paths

    def _check_timestamps(self) -> None:
        """Consecutive frames of an episode must be 1/fps apart (LeRobot's sync check)."""
        ts = self.table.columns["timestamp"].astype(np.float64)
        same_episode = self.table.episode_start[1:] == self.table.episode_start[:-1]
        gaps = np.diff(ts)[same_episode]
        bad = np.flatnonzero(np.abs(gaps - 1.0 / self.meta.fps) > self.tolerance_s)
        if bad.size:
            rows = np.flatnonzero(same_episode)[bad]
            row = int(rows[0])
            raise DataError(
                f"{self.meta.data_file(int(self.table.columns['episode_index'][row]))}: timestamps are not 1/fps "
                f"apart at {bad.size} place(s), first between index {int(self.table.columns['index'][row])} "
                f"(t={ts[row]:.6f}) and the next (t={ts[row + 1]:.6f}); fps {self.meta.fps:g}, tolerance_s "
                f"{self.tolerance_s}")

    # ---------------------------------------------------------------- Dataset API
    def close(self) -> None:
        """Closes the video decoders this process has open. A process that decoded frames (a dataset mixture's check
        of one sample per entry) calls it before DataLoader workers fork: FFmpeg's threads do not survive a fork,
        and a worker forked while they run can hang on their locks. Decoding again reopens them."""
        self.backend.close()

    def __len__(self) -> int:
        return len(self.table) if self.index is None else len(self.index)

    def episode_ranges(self) -> list[tuple[int, int]]:
        """``(start, stop)`` positions of each selected episode, in order (read by the streaming loader)."""
        if self.index is not None:
            return self.index.episode_ranges()
        starts = np.unique(self.table.episode_start)
        return [(int(s), int(self.table.episode_end[s])) for s in starts]

    @property
    def fps(self) -> float:
        """Frames per second of the dataset."""
        return self.meta.fps

    @cached_property
    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        """Normalization statistics of the numeric features over the selected episodes, as the samples carry
        them (through :attr:`feature_maps`); see :func:`embodied_data.stats.dataset_stats` for their sources.
        Computed on first access (one parquet read, no video decoding)."""
        from embodied_data.stats import dataset_stats

        return mapped_stats(self.feature_maps, dataset_stats(self.root, episodes=self.episodes, cameras=False).stats)

    @cached_property
    def features(self) -> dict[str, DatasetFeature]:
        """Metadata of the features the samples carry: the numeric features and the selected cameras, in
        ``info.json`` order (through :attr:`feature_maps`)."""
        features = {key: DatasetFeature(key=key, dtype=f.dtype, shape=f.shape, names=f.names)
                    for key, f in self.meta.features.items()
                    if not (f.is_video or f.is_image) or key in self.camera_keys}
        return mapped_features(self.feature_maps, features)

    def __getitem__(self, position: int) -> Sample:
        return self.item(position)

    def __getitems__(self, positions: Sequence[int]) -> list[Sample]:
        """The samples at ``positions`` (a DataLoader's batched fetch), their video frames decoded together."""
        with self.decode_batch(positions):
            return [self.item(int(p)) for p in positions]

    @contextlib.contextmanager
    def decode_batch(self, positions: Sequence[int]) -> Iterator[None]:
        """Decodes the video frames the samples at ``positions`` read, together; inside the ``with`` block
        :meth:`item` takes those samples' frames from here.

        Per video file: one backend call with the batch's timestamps sorted and deduplicated, so overlapping
        windows decode each frame once and a file is read front to back (no seek back between samples), on the
        decoder the backend keeps open across batches. A sample's frames have the values and strides a per-sample
        decode gives, and no other sample shares their memory (a transform may change them in place): frames only
        one sample reads are a view of the batch's tensor, frames several samples read are copied. A file whose
        batch decode fails is left to the samples that read it: each decodes its own frames and raises the error
        a per-sample read raises (naming the episode, camera and file). Only the frames are shared: everything
        else about a sample (rows, pads, the pts check, the strategy's transform) is done by :meth:`item`, once
        per sample, in the caller's order. Nested calls keep the outer batch.
        """
        if self._batch is not None or not self._video_cameras:
            yield
            return
        readers: dict[Path, dict[float, int]] = {}  # file -> timestamp -> how many samples read it
        for position in positions:
            if not 0 <= int(position) < len(self):
                continue  # item() raises the IndexError
            for path, times in self.video_reads(int(position)):
                counts = readers.setdefault(path, {})
                for t in set(times):
                    counts[t] = counts.get(t, 0) + 1
        batch: dict[Path, _DecodedFile] = {}
        for path, counts in readers.items():
            ordered = sorted(counts)
            try:
                decoded = self.backend.decode(path, ordered)
            except DataError:
                continue  # see the docstring: the samples reading this file report the error themselves
            batch[path] = _DecodedFile(decoded.frames, decoded.pts, ordered, {t for t, n in counts.items() if n > 1})
        self._batch = batch
        try:
            yield
        finally:
            self._batch = None

    def item(self, position: int, *, info: Mapping[str, Any] | None = None) -> Sample:
        """Sample ``position``; ``info``: plain values merged into it before the strategy's transform runs (a
        mixture's draw index, which DreamZero's per-sample seeding reads: ``embodied_core.data.mixture.drawn``)."""
        if not 0 <= position < len(self):
            raise IndexError(f"position {position} out of range for {len(self)} samples")
        query = SampleQuery(row=int(position)) if self.index is None else self.index.query(int(position))
        row = query.row
        start, end = int(self.table.episode_start[row]), int(self.table.episode_end[row])
        columns = self.table.columns
        sample: Sample = {}
        for key in self.data_keys:
            rows, pad = self._rows(key, query, start=start, end=end)
            if columns[key].dtype == object:  # string columns (e.g. language annotations) stay Python values
                values = columns[key]
                sample[key] = values[row] if rows is None else [values[r] for r in rows]
            elif rows is None:
                # np.array copies the row (a view would pin the whole column); faster than torch.tensor
                sample[key] = torch.from_numpy(np.array(columns[key][row]))
            else:
                sample[key] = torch.from_numpy(columns[key][rows])
                sample[f"{key}_is_pad"] = torch.from_numpy(pad)
        for cam in self.camera_keys:
            rows, pad = self._rows(cam, query, start=start, end=end)
            if rows is None:
                sample[cam] = self._frames(cam, np.asarray([row]))[0]
            else:
                sample[cam] = self._frames(cam, rows)
                sample[f"{cam}_is_pad"] = torch.from_numpy(pad)
        sample["task"] = self.meta.tasks[int(columns["task_index"][row])]
        sample.update(query.info)
        if info:
            sample.update(info)
        return self.transform(sample) if self.transform is not None else sample

    def _rows(self, key: str, query: SampleQuery, *, start: int, end: int
              ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Rows of ``key`` for one sample and their pad mask: the query's own rows, else the plan's offsets
        around the anchor row, else (None, None) for the anchor row alone."""
        if key in query.rows:
            rows = np.asarray(query.rows[key], dtype=np.int64)
            pad = query.pad.get(key)
            return rows, (np.zeros(len(rows), dtype=bool) if pad is None else np.asarray(pad, dtype=bool))
        offsets = self.offsets.get(key)
        if offsets is None:
            return None, None
        return query_indices(query.row, offsets, start=start, end=end)

    def video_reads(self, position: int) -> list[tuple[Path, list[float]]]:
        """The video files sample ``position`` reads and the times (s from the start of each file) of its frames,
        per video camera in :attr:`camera_keys` order (what :meth:`decode_batch` gathers; benchmarks replay it)."""
        query = SampleQuery(row=int(position)) if self.index is None else self.index.query(int(position))
        start, end = int(self.table.episode_start[query.row]), int(self.table.episode_end[query.row])
        reads = []
        for cam in self._video_cameras:
            rows, _ = self._rows(cam, query, start=start, end=end)
            path, _, times = self._video_times(cam, np.asarray([query.row]) if rows is None else rows)
            reads.append((path, times))
        return reads

    # ---------------------------------------------------------------- frames
    def _video_times(self, cam: str, rows: np.ndarray) -> tuple[Path, int, list[float]]:
        """The video file, episode and query times (s in the file) of ``rows`` of camera ``cam``."""
        columns = self.table.columns
        episode = int(columns["episode_index"][rows[0]])
        start = self.meta.video_from_timestamp(episode, cam)
        # float32 parquet timestamp -> Python float, plus the float64 start of the episode in the file (v3.0)
        return self._video_paths[(cam, episode)], episode, [start + float(columns["timestamp"][r]) for r in rows]

    def _frames(self, cam: str, rows: np.ndarray) -> torch.Tensor:
        if self.meta.features[cam].is_image:
            columns = self.table.columns
            episode = int(columns["episode_index"][rows[0]])
            return torch.stack([_decode_image(columns[cam][r], cam=cam, episode=episode) for r in rows])
        path, episode, query = self._video_times(cam, rows)
        batch = self._batch.get(path) if self._batch is not None else None
        taken = batch.take(query) if batch is not None else None
        if taken is not None:
            frames, frame_pts = taken
        else:
            try:
                decoded = self.backend.decode(path, query)
            except DataError as exc:
                raise type(exc)(f"episode {episode}, camera {cam}: {exc}") from None
            frames, frame_pts = decoded.frames, decoded.pts
        for t, pts in zip(query, frame_pts, strict=True):
            if abs(pts - t) > self.tolerance_s:
                raise DataError(f"{path}: episode {episode}, camera {cam}: the frame nearest t={t:.6f}s has pts "
                                f"{pts:.6f}s, {abs(pts - t):.2e}s away (> tolerance_s={self.tolerance_s}); the video "
                                f"and the parquet timestamps disagree")
        return frames

    def __repr__(self) -> str:
        return (f"LeRobotDataset({str(self.root)!r}, version={self.meta.version}, frames={len(self)}, "
                f"episodes={format_ranges(self.episodes)}, cameras={self.camera_keys}, "
                f"backend={getattr(self.backend, 'name', type(self.backend).__name__)})")


def _decode_image(data: Any, *, cam: str, episode: int) -> torch.Tensor:
    from PIL import Image

    if not isinstance(data, (bytes, bytearray)):
        raise DataError(f"camera {cam}, episode {episode}: image cell holds no encoded bytes")
    with Image.open(io.BytesIO(data)) as image:
        array = np.asarray(image.convert("RGB"))
    return torch.from_numpy(array.copy()).permute(2, 0, 1)
