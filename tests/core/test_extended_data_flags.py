"""The data, seeding and logging flags of ../shared/FLAGS_EXTENDED.md, each tested for its effect:
--sampler-shuffle, --batch-drop-last, --data-root-dir, --task-name, --set-seed-by-rank (loader side) and
--tensorboard-queue-size."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from embodied_core.config.resolve import load_config, model_spec
from embodied_core.data.loader import ResumableLoader
from embodied_core.data.samplers import cyclic_sampler
from embodied_core.distributed.base import SingleProcessStrategy
from embodied_core.model_api import collate_samples
from embodied_core.trainer import components
from embodied_core.trainer.api import Trainer
from embodied_core.trainer.rng import rank_seed_offset
from tests.support import DATASETS_DIR

V21 = DATASETS_DIR / "lerobot_written" / "v21"


def _data(**training: Any) -> components.TrainingData:
    base = {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", "num_workers": 0,
            "per_device_batch_size": 4, "num_samples": 10}
    config = load_config(training={**base, **training})
    return components.build_data(config, model_spec(config.model_name), SingleProcessStrategy(config.training))


def _epoch(data: components.TrainingData, batches: int) -> list[list[int]]:
    it = iter(data.loader)
    return [next(it)["index"].tolist() for _ in range(batches)]


def test_no_sampler_shuffle_reads_the_dataset_in_order() -> None:
    assert _epoch(_data(sampler_shuffle=False), 3) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    shuffled = _epoch(_data(), 3)
    assert sorted(i for batch in shuffled for i in batch) == list(range(10))
    assert shuffled != [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_the_last_incomplete_batch_is_kept_unless_batch_drop_last() -> None:
    kept = _data(sampler_shuffle=False)
    assert [len(b) for b in _epoch(kept, 4)] == [4, 4, 2, 4]  # the epoch ends with 2, the next starts whole
    assert kept.loader.batches_per_epoch() == 3
    dropped = _data(sampler_shuffle=False, batch_drop_last=True)
    assert _epoch(dropped, 3) == [[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3]]
    assert dropped.loader.batches_per_epoch() == 2


def test_resuming_across_the_short_batch_is_exact() -> None:
    reference = _epoch(_data(seed=3), 6)
    first = _data(seed=3)
    it = iter(first.loader)
    for _ in range(2):
        next(it)
    state = first.loader.state_dict()
    resumed = _data(seed=3)
    resumed.loader.load_state_dict(state)
    it = iter(resumed.loader)
    assert [next(it)["index"].tolist() for _ in range(4)] == reference[2:]
    with pytest.raises(ValueError, match="--batch-drop-last"):
        _data(seed=3, batch_drop_last=True).loader.load_state_dict(state)


def test_data_root_dir_resolves_a_relative_dataset_path(tmp_path: Path) -> None:
    relative = V21.relative_to(DATASETS_DIR)
    config = load_config(training={"model_name": "tiny_flow_policy", "dataset_path": str(relative),
                                   "data_root_dir": str(DATASETS_DIR), "lerobotdataset_version": "v2.1"})
    assert Path(config.training.dataset_path) == V21.absolute()
    assert config.data.state_dim == 7  # the dataset under the root was read (inferred from its info.json)
    absolute = load_config(training={"model_name": "tiny_flow_policy", "dataset_path": str(V21),
                                     "data_root_dir": str(tmp_path), "lerobotdataset_version": "v2.1"})
    assert absolute.training.dataset_path == str(V21)


def test_data_root_dir_without_a_dataset_path_is_an_error() -> None:
    from embodied_core.errors import ConfigError

    with pytest.raises(ConfigError, match="--data-root-dir /data: resolves a relative --dataset-path"):
        Trainer({"training": {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets",
                              "data_root_dir": "/data"}})


def _blank_task_copy(tmp_path: Path) -> Path:
    root = tmp_path / "v21"
    shutil.copytree(V21, root)
    (root / "meta" / "tasks.jsonl").write_text('{"task_index": 0, "task": "pick the red cube"}\n'
                                                '{"task_index": 1, "task": ""}\n')
    return root


def test_task_name_fills_samples_without_a_task(tmp_path: Path) -> None:
    root = _blank_task_copy(tmp_path)
    data = _data(dataset_format="lerobot_datasets", dataset_path=str(root), lerobotdataset_version="v2.1",
                 sampler_shuffle=False, per_device_batch_size=30, task_name="reach the goal")
    it = iter(data.loader)
    seen = [t for _ in range(4) for t in next(it)["task"]]
    assert set(seen) == {"pick the red cube", "reach the goal"}  # the blank task is replaced, the other kept


def test_default_task_name_is_loongforge_default(tmp_path: Path) -> None:
    root = _blank_task_copy(tmp_path)
    data = _data(dataset_format="lerobot_datasets", dataset_path=str(root), lerobotdataset_version="v2.1",
                 sampler_shuffle=False, per_device_batch_size=30)
    it = iter(data.loader)
    assert "perform the task" in {t for _ in range(4) for t in next(it)["task"]}


def _noisy_loader(rank: int, *, by_rank: bool) -> ResumableLoader:
    def augment(sample: dict[str, Any]) -> dict[str, Any]:
        return {**sample, "noise": torch.rand(())}  # draws from the RNG the loader seeds per sample

    samples = [{"index": torch.tensor(i)} for i in range(8)]
    return ResumableLoader(samples, batch_size=4, share_fn=cyclic_sampler(0, 1), seed=11, sample_transform=augment,
                           collate_fn=collate_samples, rank_seed=rank_seed_offset(rank, enabled=by_rank))


def test_set_seed_by_rank_gives_each_rank_its_own_augmentations_but_one_order() -> None:
    def first(rank: int, by_rank: bool) -> dict[str, torch.Tensor]:
        return next(iter(_noisy_loader(rank, by_rank=by_rank)))

    same_0, same_1 = first(0, False), first(1, False)
    torch.testing.assert_close(same_0["noise"], same_1["noise"])
    own_0, own_1 = first(0, True), first(1, True)
    assert torch.equal(own_0["index"], own_1["index"])  # the epoch order does not depend on the rank
    assert not torch.allclose(own_0["noise"], own_1["noise"])
    torch.testing.assert_close(own_0["noise"], same_0["noise"])  # rank 0's offset is 0


def test_tensorboard_queue_size_reaches_the_writer(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from embodied_core.config.training_args import TrainingArgs
    from embodied_core.loggers.tensorboard_logger import build_tensorboard

    args = TrainingArgs(tensorboard_dir=str(tmp_path / "tb"), tensorboard_queue_size=3)
    logger = build_tensorboard(args, output_dir=tmp_path, is_main=True)
    try:
        assert logger.writer.max_queue == 3
        assert logger.writer.file_writer.event_writer._async_writer._byte_queue.maxsize == 3
    finally:
        logger.close()
    assert TrainingArgs().tensorboard_queue_size == 1000
