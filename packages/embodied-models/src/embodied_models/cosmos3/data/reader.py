"""DROID window samples on our LeRobot reader: which rows a sample reads, and what it turns them into.

``FullWindowIndex`` (a :class:`~embodied_data.strategies.base.SampleIndex`): sample ``i`` is the ``i``-th window
of ``window`` consecutive rows that fits inside its episode, episode after episode (an episode of ``n`` rows has
``max(0, n - window + 1)`` of them; shorter episodes give none). ``DroidWindowTransform`` turns the rows the
dataset read into the raw Cosmos3 sample (LoongForge's ``DROIDLeRobotDataset`` item):

- ``video`` [3, T, 1.5 H, W] uint8: the wrist camera at full size on top, the two exterior cameras bilinearly
  halved (no antialias) side by side below; computed on [0, 1] floats and truncated to uint8 (as the reference);
- ``action`` [T, J + 1] float32: row 0 the observed joints and 1 - observed gripper, rows 1.. the commanded
  joints and 1 - commanded gripper (no normalisation);
- ``idle_frames``: frames whose largest joint step is below 5e-3 / fps and gripper step below 1e-2, counted only in
  runs of at least 3;
- ``ai_caption``: one of the task's ``" | "`` alternatives; ``conditioning_fps`` (int64), ``domain_id``, ``mode``,
  ``viewpoint``, ``additional_view_description``, ``dataset_index``, ``episode_index``, ``start_frame``,
  ``task_index``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from embodied_core.errors import DataError, ObservationError
from embodied_data.strategies.base import SampleQuery
from embodied_models.cosmos3.data.augment import ViewAugmentation
from embodied_models.cosmos3.data.tables import CONCAT_VIEW_DESCRIPTION
from embodied_models.cosmos3.data.video import one_thread

if TYPE_CHECKING:
    from embodied_data.lerobot.metadata import LeRobotMeta
    from embodied_data.lerobot.table import EpisodeTable

__all__ = ["DroidWindowTransform", "FullWindowIndex", "FullWindowIndexBuilder", "concat_view", "droid_action",
           "idle_frame_count"]

IDLE_JOINT_STEP = 5e-3
"""Largest joint step (per second of 1/fps) of an idle frame: the threshold is ``IDLE_JOINT_STEP / fps``."""
IDLE_GRIPPER_STEP = 1e-2
IDLE_MIN_RUN = 3


class FullWindowIndex:
    """Samples = the starts of full ``window``-row windows (see the module docstring). Picklable.

    Args:
        starts: absolute table row of each sample's first frame.
        episode_starts: table row of each sample's episode start.
        ranges: ``(start, stop)`` sample positions per episode that has samples.
        keys: data columns and cameras that read the whole window.
        window: rows per sample.
    """

    def __init__(self, starts: np.ndarray, episode_starts: np.ndarray, ranges: list[tuple[int, int]],
                 keys: tuple[str, ...], window: int) -> None:
        self.starts = starts
        self.episode_starts = episode_starts
        self.ranges = ranges
        self.keys = keys
        self.window = window

    def __len__(self) -> int:
        return len(self.starts)

    def episode_ranges(self) -> list[tuple[int, int]]:
        """``(start, stop)`` sample positions of each episode with samples."""
        return list(self.ranges)

    def query(self, position: int) -> SampleQuery:
        """The window of sample ``position``: its first row is the anchor (task, indices)."""
        start = int(self.starts[position])
        rows = np.arange(start, start + self.window, dtype=np.int64)
        offset = start - int(self.episode_starts[position])
        return SampleQuery(row=start, rows={key: rows for key in self.keys},
                           info={"dataset_index": int(position), "start_frame": offset})


class FullWindowIndexBuilder:
    """``builder(table, meta) -> FullWindowIndex`` for windows of ``window`` rows read from ``keys``."""

    def __init__(self, window: int, keys: tuple[str, ...]) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1 (got {window})")
        self.window = int(window)
        self.keys = tuple(keys)

    def __call__(self, table: EpisodeTable, meta: LeRobotMeta) -> FullWindowIndex:
        unknown = sorted(set(np.unique(table.columns["task_index"]).tolist()) - set(meta.tasks))
        if unknown:
            raise DataError(f"{meta.root}: the data rows use task_index {unknown}, which meta/tasks"
                            f"{'.parquet' if meta.version == 'v3.0' else '.jsonl'} does not list (tasks "
                            f"{sorted(meta.tasks)}); the captions are built from the task strings")
        starts: list[np.ndarray] = []
        ranges: list[tuple[int, int]] = []
        episode_starts: list[np.ndarray] = []
        total = 0
        for lo in np.unique(table.episode_start):
            lo, hi = int(lo), int(table.episode_end[lo])
            count = max(0, hi - lo - self.window + 1)
            if count == 0:
                continue
            starts.append(np.arange(lo, lo + count, dtype=np.int64))
            episode_starts.append(np.full(count, lo, dtype=np.int64))
            ranges.append((total, total + count))
            total += count
        empty = np.zeros(0, dtype=np.int64)
        return FullWindowIndex(np.concatenate(starts) if starts else empty,
                               np.concatenate(episode_starts) if episode_starts else empty, ranges, self.keys,
                               self.window)


def concat_view(wrist: torch.Tensor, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``[T, 3, H, W]`` uint8 frames of the three cameras -> the ``[3, T, H + H // 2, W]`` uint8 layout video.

    The exterior views are resized to ``(H // 2, W // 2)`` (bilinear, half-pixel centres, no antialias) on [0, 1]
    floats; the result is scaled by 255 and truncated to uint8. ``W`` must be even. The floats are made as lerobot's
    decoder makes them for LoongForge (``frames / 255.0`` of the stacked, contiguous ``[T, 3, H, W]`` frames) and
    resized in that layout, whatever the memory layout of the frames given (decoders return channels-last views):
    the truncation to uint8 turns any difference in the kernels' last bit into a whole level. The resize runs on
    one thread, as in LoongForge's loader workers (:func:`~embodied_models.cosmos3.data.video.one_thread`).
    """
    return layout_views(*(as_floats(view) for view in (wrist, left, right)))


def as_floats(view: torch.Tensor) -> torch.Tensor:
    """uint8 frames as lerobot's decoder hands them to LoongForge: ``frames / 255.0`` of the contiguous frames."""
    return (view.contiguous() / 255.0).to(torch.float32)


def layout_views(top: torch.Tensor, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """:func:`concat_view` from the three views as [0, 1] floats ``[T, 3, H, W]``."""
    half = (top.shape[-2] // 2, top.shape[-1] // 2)
    with one_thread():
        bottom = torch.cat([F.interpolate(view, size=half, mode="bilinear", align_corners=False)
                            for view in (left, right)], dim=-1)
    video = torch.cat([top, bottom], dim=-2)
    return (video * 255.0).clamp(0.0, 255.0).to(torch.uint8).permute(1, 0, 2, 3)


def droid_action(joint_state: torch.Tensor, gripper_state: torch.Tensor, joint_action: torch.Tensor,
                 gripper_action: torch.Tensor) -> torch.Tensor:
    """``[1 + K, J + 1]`` float32: the observed ``[J]`` joints and ``[1]`` gripper, then the ``K`` commanded
    rows; grippers as ``1 - g``."""
    state = torch.cat([joint_state.reshape(-1).float(), (1.0 - gripper_state.reshape(1).double()).float()])
    commanded = torch.cat([joint_action.reshape(len(joint_action), joint_state.numel()).float(),
                           1.0 - gripper_action.reshape(len(gripper_action), 1).float()], dim=-1)
    return torch.cat([state[None], commanded])


def _long_runs(mask: np.ndarray, min_run: int) -> np.ndarray:
    """``mask`` with True runs shorter than ``min_run`` cleared."""
    out = np.zeros_like(mask)
    edges = np.flatnonzero(np.diff(np.r_[0, mask.astype(np.int8), 0]))
    for lo, hi in zip(edges[::2], edges[1::2], strict=True):
        if hi - lo >= min_run:
            out[lo:hi] = True
    return out


def idle_frame_count(action: torch.Tensor, fps: float, *, joints: int) -> int:
    """Frames of ``action`` [T, joints + 1] that barely move (see the module docstring); the first frame's step
    is zero."""
    values = action.detach().cpu().numpy().astype(np.float32, copy=False)
    steps = np.abs(np.diff(values, axis=0, prepend=values[:1]))
    idle = (steps[:, :joints].max(axis=1) < IDLE_JOINT_STEP / float(fps)) & \
           (steps[:, joints:].max(axis=1) < IDLE_GRIPPER_STEP)
    return int(_long_runs(idle, IDLE_MIN_RUN).sum())


class DroidWindowTransform:
    """The rows of one window -> the raw Cosmos3 sample (see the module docstring). Picklable.

    Args:
        camera_keys: wrist, left, right camera keys.
        joint_action_key, gripper_action_key, joint_state_key, gripper_state_key: the DROID columns.
        fps: frame rate of the samples (caption, idle threshold, ``conditioning_fps``).
        domain_id: the embodiment's domain id.
        caption_choice: 'sample_seed' (global ``random``, seeded per sample by the loader) or 'position'
            (``random.Random(position)``).
        augmentation: the training-only view augmentation (``data.use_image_augmentation``), or None.
        state_key: key of the assembled ``[J + 1]`` state (joints, 1 - gripper) in policy observations.
    """

    def __init__(self, *, camera_keys: tuple[str, str, str], joint_action_key: str, gripper_action_key: str,
                 joint_state_key: str, gripper_state_key: str, fps: float, domain_id: int,
                 caption_choice: str, state_key: str = "observation.state",
                 augmentation: ViewAugmentation | None = None) -> None:
        self.camera_keys = tuple(camera_keys)
        self.state_key = state_key
        self.joint_action_key, self.gripper_action_key = joint_action_key, gripper_action_key
        self.joint_state_key, self.gripper_state_key = joint_state_key, gripper_state_key
        self.fps = float(fps)
        self.domain_id = int(domain_id)
        self.caption_choice = caption_choice
        self.augmentation = augmentation

    def _caption(self, task: str, position: int) -> str:
        if not task:
            return ""
        options = task.split(" | ")
        rng = random.Random(position) if self.caption_choice == "position" else random
        return options[rng.randrange(len(options))]

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        wrist, left, right = (sample[key] for key in self.camera_keys)
        joint_state = sample[self.joint_state_key]
        if wrist.shape[0] != joint_state.shape[0]:
            raise DataError(f"cosmos3_droid: sample {sample.get('dataset_index')} read {wrist.shape[0]} frames but "
                            f"{joint_state.shape[0]} rows of {self.joint_state_key!r}")
        action = droid_action(joint_state[0], sample[self.gripper_state_key][0], sample[self.joint_action_key][1:],
                              sample[self.gripper_action_key][1:])
        position = int(sample["dataset_index"])
        views = (wrist, left, right)
        video = concat_view(*views) if self.augmentation is None else layout_views(*self.augmentation(views, position))
        return {
            "video": video,
            "action": action,
            "ai_caption": self._caption(str(sample["task"]), position),
            "additional_view_description": CONCAT_VIEW_DESCRIPTION,
            "conditioning_fps": torch.tensor(int(self.fps), dtype=torch.long),
            "mode": "policy",
            "domain_id": torch.tensor(self.domain_id, dtype=torch.long),
            "viewpoint": "concat_view",
            "idle_frames": torch.tensor(idle_frame_count(action, self.fps, joints=action.shape[-1] - 1),
                                        dtype=torch.long),
            "dataset_index": torch.tensor(position, dtype=torch.long),
            "episode_index": torch.tensor(int(sample["episode_index"]), dtype=torch.long),
            "start_frame": torch.tensor(int(sample["start_frame"]), dtype=torch.long),
            "task_index": torch.tensor(int(sample["task_index"]), dtype=torch.long),
        }

    def observation(self, observation: Mapping[str, Any]) -> dict[str, Any]:
        """A policy observation -> the raw sample of one frame (``video`` [3, 1, 1.5 H, W], ``action`` = the
        observed state row [1, J + 1]), for the same per-sample transform as training.

        ``observation`` holds the three cameras (one uint8 frame each, HWC or CHW), the state as the dataset's
        joint and gripper columns (``data.joint_state_key`` / ``data.gripper_state_key``, gripper as recorded) or as
        ``data.state_key`` (``[J + 1]``, gripper already ``1 - g``), and ``task`` (its first ``" | "``
        alternative is used).
        """
        frames = [_frame(observation, key) for key in self.camera_keys]
        if self.joint_state_key in observation and self.gripper_state_key in observation:
            joints = torch.as_tensor(np.asarray(observation[self.joint_state_key], dtype=np.float32)).reshape(-1)
            gripper = torch.as_tensor(np.asarray(observation[self.gripper_state_key], dtype=np.float32)).reshape(-1)
            if gripper.numel() != 1:
                raise ObservationError(f"{self.gripper_state_key!r}: expected one gripper value, got "
                                       f"{gripper.numel()}")
            state = droid_action(joints, gripper, torch.zeros(0, joints.numel()), torch.zeros(0, 1))
        elif self.state_key in observation:
            state = torch.as_tensor(np.asarray(observation[self.state_key], dtype=np.float32)).reshape(1, -1)
        else:
            raise ObservationError(f"the observation has no state: give {self.joint_state_key!r} and "
                                   f"{self.gripper_state_key!r}, or {self.state_key!r} (joints, then 1 - gripper); "
                                   f"got keys {sorted(observation)}")
        task = str(observation.get("task") or "")
        return {
            "video": concat_view(*(f[None] for f in frames)),
            "action": state,
            "ai_caption": task.split(" | ")[0] if task else "",
            "additional_view_description": CONCAT_VIEW_DESCRIPTION,
            "conditioning_fps": torch.tensor(int(self.fps), dtype=torch.long),
            "mode": "policy",
            "domain_id": torch.tensor(self.domain_id, dtype=torch.long),
            "viewpoint": "concat_view",
            "idle_frames": torch.tensor(0, dtype=torch.long),
        }


def _frame(observation: Mapping[str, Any], key: str) -> torch.Tensor:
    """One camera frame of a policy observation as ``[3, H, W]`` uint8 (HWC or CHW accepted)."""
    if key not in observation:
        raise ObservationError(f"the observation lacks the camera {key!r} (got keys {sorted(observation)})")
    frame = torch.as_tensor(np.asarray(observation[key]))
    if frame.dtype != torch.uint8 or frame.ndim != 3 or 3 not in (frame.shape[0], frame.shape[-1]):
        raise ObservationError(f"{key!r}: expected one uint8 RGB frame (H, W, 3) or (3, H, W), got "
                               f"{frame.dtype} {list(frame.shape)}")
    return frame if frame.shape[0] == 3 and frame.shape[-1] != 3 else frame.permute(2, 0, 1).contiguous()
