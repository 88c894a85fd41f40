"""``DatasetPlan.sample_index``: strategies whose samples are not "every frame" (full-window starts here)."""

from __future__ import annotations

import itertools
import pickle
from typing import Any

import attrs
import numpy as np
import pytest
import torch

from embodied_core.errors import DataError
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.lerobot.table import EpisodeTable
from embodied_data.strategies.base import SampleIndex, SampleQuery
from tests.support import DATASETS_DIR

ROOT = DATASETS_DIR / "lerobot_written" / "v30"
CAMERA = "observation.images.front"


@attrs.frozen
class _Windows:
    """Samples = rows that have ``length - 1`` later rows in their episode; reads the window of actions and
    every other frame of it."""

    starts: np.ndarray
    length: int
    table_starts: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def query(self, position: int) -> SampleQuery:
        row = int(self.starts[position])
        window = np.arange(row, row + self.length)
        return SampleQuery(row=row, rows={"action": window, CAMERA: window[::2]},
                           pad={"action": window > row + self.length - 2}, info={"window_start": row})

    def episode_ranges(self) -> list[tuple[int, int]]:
        episode_of = self.table_starts[self.starts]
        edges = np.flatnonzero(np.diff(episode_of)) + 1
        bounds = [0, *edges.tolist(), len(self.starts)]
        return list(itertools.pairwise(bounds))


@attrs.frozen
class FullWindows:
    """A picklable builder (as strategies must write them)."""

    length: int

    def __call__(self, table: EpisodeTable, meta: LeRobotMeta) -> SampleIndex:
        rows = np.arange(len(table))
        starts = rows[rows + self.length <= table.episode_end]
        return _Windows(starts=starts, length=self.length, table_starts=table.episode_start)


def _dataset(**kwargs: Any) -> LeRobotDataset:
    return LeRobotDataset(ROOT, video_backend="pyav", camera_keys=[CAMERA], sample_index=FullWindows(5), **kwargs)


def test_sample_index_selects_rows_pads_and_info() -> None:
    every_frame = LeRobotDataset(ROOT, video_backend="pyav", camera_keys=[CAMERA],
                                 delta_timestamps={"observation.state": [0.0]})
    data = _dataset(delta_timestamps={"observation.state": [0.0]})
    lengths = np.diff([s for s, _ in every_frame.episode_ranges()] + [len(every_frame)])
    assert len(data) == int(sum(max(0, n - 4) for n in lengths))
    ranges = data.episode_ranges()
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))

    position = len(data) - 1  # the last full window of the last episode
    sample = data[position]
    row = sample["window_start"]
    reference = every_frame[row]
    assert sample["frame_index"] == reference["frame_index"] and sample["task"] == reference["task"]
    expected_actions = torch.stack([every_frame[r]["action"] for r in range(row, row + 5)])
    assert torch.equal(sample["action"], expected_actions)
    assert sample["action_is_pad"].tolist() == [False, False, False, False, True]
    assert sample[CAMERA].shape[0] == 3 and not sample[f"{CAMERA}_is_pad"].any()
    assert torch.equal(sample[CAMERA][1], every_frame[row + 2][CAMERA])
    # keys the query does not name keep the plan's offsets around the anchor row
    assert torch.equal(sample["observation.state"], reference["observation.state"])
    assert sample["observation.state_is_pad"].tolist() == [False]
    with pytest.raises(IndexError, match="out of range"):
        data[len(data)]


def test_dataset_with_sample_index_pickles_for_workers() -> None:
    data = _dataset()
    clone = pickle.loads(pickle.dumps(data))
    assert len(clone) == len(data) and torch.equal(clone[3]["action"], data[3]["action"])


def test_index_without_samples_is_a_data_error() -> None:
    with pytest.raises(DataError, match="no samples"):
        LeRobotDataset(ROOT, video_backend="pyav", camera_keys=[CAMERA], sample_index=FullWindows(10_000))
