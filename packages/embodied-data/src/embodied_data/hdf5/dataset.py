"""``hdf5_datasets``: a map-style dataset over robomimic or ALOHA HDF5 episodes with LeRobot sample keys.

Time windows come from the model's DataConfig, with LeRobot's semantics: ``action`` holds frames
``t .. t+H-1``, state and cameras ``t-S+1 .. t``; indices outside the episode are clamped to its edge
frame and flagged in ``<key>_is_pad``. With a history of 1, state and cameras have no time axis and no
pad mask (as ``dummy_datasets``). Files are opened lazily in each process (h5py handles do not survive
``fork``) and kept in a small LRU.
"""

from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import DataError
from embodied_core.protocols import DatasetFeature
from embodied_data.hdf5.layouts import Hdf5Episode, Hdf5Index, Source, scan_hdf5
from embodied_data.hdf5.preflight import missing_keys_problem

__all__ = ["Hdf5Dataset", "build_hdf5_dataset", "decode_jpeg"]


def decode_jpeg(data: np.ndarray, *, where: str) -> np.ndarray:
    """JPEG bytes (trailing zero padding allowed) -> uint8 RGB ``[H, W, 3]``."""
    buffer = np.ascontiguousarray(np.asarray(data, dtype=np.uint8).reshape(-1))
    try:
        import cv2
    except ImportError:
        cv2 = None
    if cv2 is not None:
        bgr = cv2.imdecode(buffer, cv2.IMREAD_COLOR)
        if bgr is None:
            raise DataError(f"{where}: cannot decode the stored image bytes as JPEG/PNG")
        return bgr[..., ::-1].copy()
    import io

    from PIL import Image

    try:
        return np.asarray(Image.open(io.BytesIO(buffer.tobytes())).convert("RGB"))
    except OSError as exc:
        raise DataError(f"{where}: cannot decode the stored image bytes ({exc})") from None


class Hdf5Dataset(Dataset):
    """Samples with LeRobot keys from HDF5 episodes.

    Args:
        path: a robomimic file, an ALOHA episode file, or a folder of episode files.
        data_config: the model's DataConfig (keys, action horizon, histories).
        split: robomimic ``mask/<split>``; ``train`` without masks means every episode.
        max_open_files: open HDF5 files kept per process.
    """

    def __init__(self, path: str, data_config: BaseDataConfig, *, split: str = "train", max_open_files: int = 8):
        self.index: Hdf5Index = scan_hdf5(path, split=split)
        self.config = data_config
        self.max_open_files = max_open_files
        self._check_keys()
        self._starts = np.cumsum([0] + [ep.length for ep in self.index.episodes]).tolist()
        self._offsets = {
            data_config.action_key: np.arange(data_config.action_horizon),
            data_config.state_key: np.arange(-data_config.state_history + 1, 1),
            **{cam: np.arange(-data_config.image_history + 1, 1) for cam in data_config.camera_keys},
        }
        self._files: OrderedDict[str, Any] = OrderedDict()
        self._pid = os.getpid()

    def _check_keys(self) -> None:
        problem = missing_keys_problem(self.index, self.config)
        if problem:
            raise DataError(problem)

    def __len__(self) -> int:
        return self._starts[-1]

    @property
    def root(self) -> Path:
        """The HDF5 file or folder of episode files."""
        return self.index.root

    @property
    def episodes(self) -> list[int]:
        """Ids of the episodes of the split, in reading order."""
        return [ep.index for ep in self.index.episodes]

    @property
    def fps(self) -> float | None:
        """The frame rate (a file's ``fps`` attribute or the layout's default); None when unknown."""
        return self.index.fps or None

    @cached_property
    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        """Normalization statistics of the numeric keys, exact over every frame of the split (computed on first
        access; :meth:`compute_stats` adds the cameras)."""
        return self.compute_stats(cameras=False)

    @cached_property
    def features(self) -> dict[str, DatasetFeature]:
        """Metadata of the keys the samples carry, in the file's order (cameras ``image`` ``[H, W, 3]``; the
        sides of JPEG frames are 0 when the file does not record them)."""
        carried = {*self._offsets, "next.reward", "next.done"}
        return {key: DatasetFeature(key=key, dtype="image" if s.kind in ("image", "jpeg") else "float32",
                                    shape=tuple(s.shape))
                for key, s in self.index.features.items() if key in carried}

    def episode_ranges(self) -> list[tuple[int, int]]:
        """``(start, stop)`` index range of each episode (read by the streaming loader)."""
        return list(zip(self._starts[:-1], self._starts[1:], strict=True))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_files"] = OrderedDict()  # open h5py handles cannot be pickled into spawned workers
        return state

    def _group(self, episode: Hdf5Episode) -> Any:
        import h5py

        if os.getpid() != self._pid:  # forked worker: inherited handles are unsafe, reopen
            self._files, self._pid = OrderedDict(), os.getpid()
        key = str(episode.file)
        handle = self._files.get(key)
        if handle is None:
            handle = h5py.File(key, "r")
            self._files[key] = handle
            while len(self._files) > self.max_open_files:
                self._files.popitem(last=False)[1].close()
        self._files.move_to_end(key)
        return handle[episode.group]

    def _read(self, group: Any, source: Source, rows: np.ndarray, where: str) -> np.ndarray:
        lo, hi = int(rows.min()), int(rows.max()) + 1
        if source.kind == "jpeg":
            dataset = group[source.paths[0]]
            decoded = {int(r): decode_jpeg(dataset[int(r)], where=f"{where} frame {int(r)}") for r in np.unique(rows)}
            return np.stack([decoded[int(r)] for r in rows])
        parts = []
        for path in source.paths:
            block = np.asarray(group[path][lo:hi])
            parts.append(block if source.kind == "image" else block.reshape(hi - lo, -1))
        block = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)
        return block[rows - lo]

    def _window(self, episode: Hdf5Episode, group: Any, key: str, frame: int) -> tuple[np.ndarray, np.ndarray]:
        wanted = frame + self._offsets[key]
        pad = (wanted < 0) | (wanted >= episode.length)
        rows = np.clip(wanted, 0, episode.length - 1)
        return self._read(group, episode.sources[key], rows, f"{episode.file}:{episode.group}/{key}"), pad

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} frames")
        ep_pos = bisect.bisect_right(self._starts, index) - 1
        episode = self.index.episodes[ep_pos]
        frame = index - self._starts[ep_pos]
        group = self._group(episode)
        cfg = self.config
        sample: dict[str, Any] = {}
        for key in self._offsets:
            values, pad = self._window(episode, group, key, frame)
            is_image = episode.sources[key].kind in ("image", "jpeg")
            tensor = torch.from_numpy(np.ascontiguousarray(values.transpose(0, 3, 1, 2) if is_image else values))
            tensor = tensor if is_image else tensor.float()
            history = len(self._offsets[key])
            if key != cfg.action_key and history == 1:
                sample[key] = tensor[0]
            else:
                sample[key] = tensor
                sample[f"{key}_is_pad"] = torch.from_numpy(pad)
        for key in ("next.reward", "next.done"):
            if key in episode.sources:
                value = np.asarray(group[episode.sources[key].paths[0]][frame]).reshape(())
                sample[key] = torch.tensor(bool(value)) if key == "next.done" else torch.tensor(float(value))
        sample["task"] = episode.task
        sample["index"] = torch.tensor(index)
        sample["episode_index"] = torch.tensor(episode.index)
        sample["frame_index"] = torch.tensor(frame)
        sample["timestamp"] = torch.tensor(frame / self.index.fps, dtype=torch.float32)
        return sample

    def compute_stats(self, *, frames_per_episode: int = 8, cameras: bool = True) -> dict[str, dict[str, np.ndarray]]:
        """Stats of every key: low-dim keys exactly over every frame, cameras (unless ``cameras=False``) from
        ``frames_per_episode`` frames per episode."""
        from embodied_data.stats import compute_feature_stats, compute_image_stats
        from embodied_data.stats.frames import sample_positions

        values: dict[str, list[np.ndarray]] = {}
        for episode in self.index.episodes:
            group = self._group(episode)
            for key, source in episode.sources.items():
                if source.kind in ("image", "jpeg") and not cameras:
                    continue
                if source.kind in ("image", "jpeg"):
                    rows = np.asarray(sample_positions(episode.length, frames_per_episode))
                else:
                    rows = np.arange(episode.length)
                values.setdefault(key, []).append(self._read(group, source, rows, f"{episode.file}/{key}"))
        stats = {}
        for key, parts in values.items():
            if self.index.features[key].kind in ("image", "jpeg"):
                stats[key] = compute_image_stats(np.concatenate(parts), channels_last=True)
                stats[key]["count"] = np.array([self._starts[-1]], dtype=np.int64)
            else:
                stats[key] = compute_feature_stats(np.concatenate(parts).astype(np.float64))
        return stats


def build_hdf5_dataset(args: TrainingArgs, data_config: BaseDataConfig) -> Hdf5Dataset:
    """Factory of ``hdf5_datasets`` (reads ``--dataset-path`` and ``--split``)."""
    if not args.dataset_path:
        raise DataError("hdf5_datasets needs --dataset-path (a robomimic .hdf5 file or a folder of ALOHA episodes)")
    return Hdf5Dataset(args.dataset_path, data_config, split=args.split)
