"""MapDataset: ``__len__`` + ``__getitem__`` is a training dataset. The defaults (root/episodes/fps None, one
episode range, features from the first sample, stats from a bounded deterministic sample of items), a plain list of
dicts from a format's factory adapted the same way, and the format spec's DatasetDefaults replacing them."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from embodied_core import registry
from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.data import MapDataset
from embodied_core.data.dataset import build_training_dataset
from embodied_core.data.map_dataset import adapt_dataset
from embodied_core.errors import DataError, PluginError
from embodied_core.protocols import DATASET_MEMBERS, DatasetFeature, missing_members
from embodied_core.registry import DatasetDefaults, DatasetFormatSpec, groups
from tests.support import REPO_ROOT, clean_env

HERE = "tests.core.test_map_dataset"


def _items(num: int = 10) -> list[dict[str, Any]]:
    """Samples as a first-release plugin wrote them: numpy arrays, python numbers, a task string."""
    rng = np.random.default_rng(0)
    return [{"observation.images.front": rng.integers(0, 256, (3, 6, 5), dtype=np.uint8),
             "observation.state": np.arange(3, dtype=np.float32) + i, "action": np.full((2, 4), float(i), np.float32),
             "action_is_pad": np.array([False, i % 2 == 1]), "task": "push", "index": i} for i in range(num)]


def test_a_list_of_dicts_gets_every_member() -> None:
    items = _items()
    dataset = adapt_dataset(items, format_name="listed")
    assert missing_members(dataset, DATASET_MEMBERS) == []
    assert (dataset.root, dataset.episodes, dataset.fps, dataset.episode_ranges()) == (None, None, None, [(0, 10)])
    assert len(dataset) == 10 and dataset[3] is items[3]
    assert dataset.features == {
        "observation.images.front": DatasetFeature(key="observation.images.front", dtype="image", shape=(6, 5, 3)),
        "observation.state": DatasetFeature(key="observation.state", dtype="float32", shape=(3,)),
        "action": DatasetFeature(key="action", dtype="float32", shape=(4,)),  # one frame of the [H, D] chunk
        "index": DatasetFeature(key="index", dtype="int64", shape=(1,))}
    stats = dataset.stats
    assert set(stats) == {"observation.state", "action", "index"}  # no camera
    state = np.stack([item["observation.state"] for item in items]).astype(np.float64)
    np.testing.assert_array_equal(stats["observation.state"]["mean"], state.mean(axis=0))
    np.testing.assert_array_equal(stats["observation.state"]["q01"], np.quantile(state, 0.01, axis=0))
    actions = np.concatenate([item["action"][~item["action_is_pad"]] for item in items]).astype(np.float64)
    assert stats["action"]["count"].tolist() == [15] and stats["action"]["max"].tolist() == [9.0] * 4
    np.testing.assert_array_equal(stats["action"]["std"], actions.std(axis=0))
    assert {name: value.dtype for name, value in stats["index"].items()} == {
        **{name: np.float64 for name in ("min", "max", "mean", "std", "q01", "q10", "q50", "q90", "q99")},
        "count": np.int64}


def test_stats_read_a_bounded_deterministic_sample_of_items() -> None:
    read: list[int] = []

    class Counting(MapDataset):
        stats_sample_size = 4

        def __len__(self) -> int:
            return 10

        def __getitem__(self, index: int) -> dict[str, Any]:
            read.append(index)
            return _items()[index]

    dataset = Counting()
    assert dataset.stats["index"]["mean"].tolist() == [4.5]  # items 0, 3, 6, 9
    assert read == [0, 0, 3, 6, 9]  # the first sample (features), then the evenly spaced ones
    assert dataset.stats is dataset.stats and len(read) == 5  # computed once
    assert Counting().stats["observation.state"]["q50"].tolist() == dataset.stats["observation.state"]["q50"].tolist()


def test_inconsistent_or_empty_items_are_data_errors() -> None:
    items = _items(4)
    items[3]["observation.state"] = np.zeros(5, np.float32)
    with pytest.raises(DataError, match=r"--dataset-format bad: list.stats: item 3 has 'observation.state' in "
                                        r"another shape than the first item's \(3,\)"):
        _ = adapt_dataset(items, format_name="bad").stats
    with pytest.raises(DataError, match=r"--dataset-format empty: list.features: the dataset is empty"):
        _ = adapt_dataset([], format_name="empty").features
    with pytest.raises(PluginError, match=r"--dataset-format gen: the dataset it built \(generator\) lacks __len__, "
                                          r"__getitem__; a format's factory returns a map-style dataset"):
        adapt_dataset((item for item in items), format_name="gen")


def fps_of(dataset: Any) -> Any:  # a stats function a spec names
    return {"observation.state": {"mean": np.full(3, 7.0), "std": np.ones(3)}}


def two_episodes(dataset: Any) -> list[tuple[int, int]]:
    return [(0, 4), (4, len(dataset))]


def build_listed(args: TrainingArgs, data_config: BaseDataConfig) -> list[dict[str, Any]]:
    return _items(args.num_samples)


STATE_ONLY = (DatasetFeature(key="observation.state", dtype="float32", shape=(3,), names=("x", "y", "z")),)
LISTED = DatasetFormatSpec(name="listed", description="a list of dicts", factory=f"{HERE}:build_listed",
                           uses_flags=("num_samples",), needs_path=False, dataset_defaults=DatasetDefaults(
                               fps=15, features=STATE_ONLY, stats=f"{HERE}:fps_of",
                               episode_ranges=f"{HERE}:two_episodes"))


def test_the_format_spec_replaces_the_defaults() -> None:
    registry.register(groups.DATASET_FORMATS, "listed", LISTED, replace=True)
    try:
        dataset = build_training_dataset(TrainingArgs(dataset_format="listed", num_samples=6), BaseDataConfig())
    finally:
        registry.unregister(groups.DATASET_FORMATS, "listed")
    assert dataset.fps == 15.0 and dataset.episode_ranges() == [(0, 4), (4, 6)]
    assert dataset.features == {"observation.state": STATE_ONLY[0]}
    assert dataset.stats["observation.state"]["mean"].tolist() == [7.0] * 3


def test_a_spec_default_for_a_member_the_dataset_implements_is_an_error() -> None:
    class WithFps(MapDataset):
        def __init__(self) -> None:
            self.fps = 30.0

        def __len__(self) -> int:
            return 1

        def __getitem__(self, index: int) -> dict[str, Any]:
            return _items(1)[0]

    with pytest.raises(PluginError, match=r"--dataset-format own: its spec's dataset_defaults set fps, which the "
                                          r"dataset it built \(WithFps\) implements itself"):
        adapt_dataset(WithFps(), format_name="own", defaults=DatasetDefaults(fps=10.0))
    assert adapt_dataset(WithFps(), format_name="own", defaults=DatasetDefaults(stats_sample_size=1)).fps == 30.0
    with pytest.raises(ValueError, match=r"DatasetDefaults.features declares a key twice"):
        DatasetDefaults(features=STATE_ONLY * 2)


def test_map_dataset_and_the_spec_defaults_import_no_torch() -> None:
    code = ("import sys\nfrom embodied_core.data import MapDataset\n"
            "from embodied_core.registry import DatasetDefaults\n"
            "class D(MapDataset):\n    def __len__(self): return 2\n"
            "    def __getitem__(self, i): return {'action': [float(i), 1.0]}\n"
            "print(D().stats['action']['mean'].tolist(), 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                            env=clean_env(), timeout=60)
    assert result.stdout.split("]")[-1].strip() == "False" and "[0.5, 1.0]" in result.stdout, result.stderr
