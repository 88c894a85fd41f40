"""Bad data ends with our message, from DataLoader workers too, and ``embodied data inspect`` finds it first.

Real files: copies of ``lerobot_written/v30`` from ../shared, truncated or edited in tmp_path (an mp4 cut short
behind an intact header, a truncated parquet, timestamps shifted past the video, a column narrower than
info.json says), run through the real ``embodied`` CLI and the real ResumableLoader with worker processes.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import Dataset

from embodied_core import registry
from embodied_core.data.loader import ResumableLoader
from embodied_core.data.samplers import cyclic_sampler
from embodied_core.errors import ConfigError, DataError
from embodied_core.model_api import collate_samples
from embodied_data.cli.inspect import inspect_dataset
from embodied_data.cli.inspect_video import probe_video
from embodied_data.lerobot.dataset import LeRobotDataset
from tests.support import DATASETS_DIR, run_embodied

SOURCE = DATASETS_DIR / "lerobot_written" / "v30"
DATA_0 = "data/chunk-000/file-000.parquet"  # episodes 0-2
DATA_1 = "data/chunk-000/file-001.parquet"  # episode 3
FRONT_0 = "videos/observation.images.front/chunk-000/file-000.mp4"  # episodes 0-1
WRIST_1 = "videos/observation.images.wrist/chunk-000/file-001.mp4"  # episode 3
TRAIN = ["train", "--model-name", "tiny_flow_policy", "--train-iters", "2", "--num-workers", "2", "--dtype", "float32",
         "data.camera_keys=[observation.images.front]", "data.state_dim=7", "data.action_dim=4"]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "v30"
    shutil.copytree(SOURCE, root)
    return root


def _truncate(path: Path, fraction: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])


def _shift_timestamps(path: Path, seconds: float) -> None:
    table = pq.read_table(path)
    shifted = pc.add(table.column("timestamp"), pa.scalar(seconds, pa.float32()))
    pq.write_table(table.set_column(table.column_names.index("timestamp"), "timestamp", shifted), path)


def _narrow_action(path: Path, width: int) -> None:
    table = pq.read_table(path)
    values = [row[:width] for row in table.column("action").to_pylist()]
    column = pa.array(values, pa.list_(pa.float32(), width))
    pq.write_table(table.set_column(table.column_names.index("action"), "action", column), path)


# ------------------------------------------------------------------ errors raised in DataLoader workers
def _bad_file_error(error: type[Exception]) -> Exception:
    """A DataError, or a ConfigError (whose message is built from its problems in ``__init__``)."""
    problem = "/data/episode_5.parquet: unreadable"
    return error([problem]) if error is ConfigError else error(problem)


class _BadRow(Dataset):
    """Row 5 is a "bad file"."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> dict[str, Any]:
        if index == 5:
            raise _bad_file_error(self.error)
        return {"x": torch.tensor(float(index))}


def _drain(loader: ResumableLoader) -> None:
    iterator = iter(loader)
    for _ in range(loader.batches_per_epoch() + 1):
        next(iterator)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("error", "streaming"), [(DataError, False), (DataError, True), (ConfigError, False)],
                         ids=["map", "streaming", "config-error"])
def test_worker_errors_reach_the_trainer_as_themselves(error: type[Exception], streaming: bool,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    loader = ResumableLoader(_BadRow(error), batch_size=2, share_fn=cyclic_sampler(0, 1), seed=0, shuffle=False,
                             sample_transform=None, collate_fn=collate_samples, num_workers=2, streaming=streaming)
    expected = str(_bad_file_error(error))
    with caplog.at_level(logging.DEBUG, logger="embodied.data"), pytest.raises(error) as caught:
        _drain(loader)
    assert type(caught.value) is error
    assert str(caught.value) == expected  # our message only, not torch's "Caught DataError in DataLoader worker"
    if error is ConfigError:
        assert caught.value.problems == ["/data/episode_5.parquet: unreadable"]
    assert "DataLoader worker" not in str(caught.value)
    assert any("Traceback" in r.getMessage() and "test_bad_data.py" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("streaming", [False, True], ids=["map", "streaming"])
def test_a_worker_error_stops_the_workers_before_it_reaches_the_caller(streaming: bool) -> None:
    """The failed iteration shuts its persistent workers down itself. Left to the cyclic garbage collector (a
    caller that keeps the exception in a local puts the loader in its frame's cycle), torch's shutdown ran after
    the worker queues' own finalizers, its stop signal never reached the workers, and it waited 5 s per worker."""
    loader = ResumableLoader(_BadRow(DataError), batch_size=2, share_fn=cyclic_sampler(0, 1), seed=0, shuffle=False,
                             sample_transform=None, collate_fn=collate_samples, num_workers=2, streaming=streaming)
    before = set(multiprocessing.active_children())
    iterator = iter(loader)
    assert next(iterator)["x"].tolist() == [0.0, 1.0]  # the workers are up
    workers = [p for p in multiprocessing.active_children() if p not in before]
    assert len(workers) == 2
    assert next(iterator)["x"].tolist() == [2.0, 3.0]
    with pytest.raises(DataError):
        next(iterator)  # rows 4 and 5
    assert [w.is_alive() for w in workers] == [False, False]
    assert loader.position == 4  # batches 0 and 1 were read; the failed one is not skipped: a new iteration
    with pytest.raises(DataError, match=r"episode_5\.parquet"):  # (new workers) reads it again
        next(iter(loader))


@pytest.mark.timeout(120)
def test_train_on_a_truncated_video_prints_our_message_from_the_workers(dataset: Path, tmp_path: Path) -> None:
    _truncate(dataset / FRONT_0, 0.5)
    result = run_embodied(*TRAIN, "--dataset-path", str(dataset), "--output-dir", str(tmp_path / "out"), timeout=110)
    assert result.returncode == 1, result.stderr
    assert str(dataset / FRONT_0) in result.stderr
    assert "Traceback" not in result.stderr and "DataLoader worker" not in result.stderr, result.stderr


# ------------------------------------------------------------------ parquet files
@pytest.mark.timeout(120)
def test_train_on_a_truncated_parquet_names_the_file(dataset: Path, tmp_path: Path) -> None:
    _truncate(dataset / DATA_1, 0.5)
    result = run_embodied(*TRAIN, "--dataset-path", str(dataset), "--output-dir", str(tmp_path / "out"), timeout=110)
    assert result.returncode == 1, result.stderr
    assert f"{dataset / DATA_1}: unreadable parquet file" in result.stderr
    assert "Traceback" not in result.stderr and "ArrowInvalid: " not in result.stderr.split("unreadable")[0]


def test_reader_refuses_a_column_narrower_than_info_json(dataset: Path) -> None:
    _narrow_action(dataset / DATA_0, 3)
    with pytest.raises(DataError, match=r"file-000.parquet: column 'action' has 3 value\(s\) per row, but "
                                        r"meta/info.json declares shape \[4\]"):
        LeRobotDataset(dataset, camera_keys=[], video_backend="pyav")


# ------------------------------------------------------------------ inspect
def test_inspect_decodes_the_last_frame_of_a_video_cut_behind_its_header(dataset: Path) -> None:
    _truncate(dataset / FRONT_0, 0.5)
    assert probe_video(dataset / FRONT_0)["duration"] > 2.9  # the header still promises every frame
    report = inspect_dataset(dataset)
    assert [p for p in report.problems if str(dataset / FRONT_0) in p and "episode 1" in p], report.problems
    assert not [p for p in report.problems if "episode 0" in p]  # episode 0's frames are all before the cut


def test_inspect_checks_timestamps_against_the_video_streams(dataset: Path) -> None:
    _shift_timestamps(dataset / DATA_0, 100.0)
    report = inspect_dataset(dataset)
    front = [p for p in report.problems if p.startswith("observation.images.front") and str(dataset / FRONT_0) in p]
    assert front and "episode(s) 0-1 need frames up to 102.933s" in front[0], report.problems


def test_inspect_compares_column_widths_with_info_json(dataset: Path) -> None:
    _narrow_action(dataset / DATA_0, 3)
    info = json.loads((dataset / "meta/info.json").read_text())
    info["features"]["observation.state"]["shape"] = [8]
    (dataset / "meta/info.json").write_text(json.dumps(info))
    problems = inspect_dataset(dataset).problems
    assert f"{dataset / DATA_0}: column 'action' has 3 value(s) per row, but info.json declares shape [4] " \
           "(4 value(s))" in problems
    for path in (DATA_0, DATA_1):
        assert f"{dataset / path}: column 'observation.state' has 7 value(s) per row, but info.json declares " \
               "shape [8] (8 value(s))" in problems


def test_inspect_names_every_missing_or_unreadable_file(dataset: Path) -> None:
    (dataset / DATA_1).unlink()
    (dataset / WRIST_1).unlink()
    _truncate(dataset / DATA_0, 0.5)
    problems = "\n".join(inspect_dataset(dataset).problems)
    assert f"data files missing for 1 episode(s): 3: {dataset / DATA_1}" in problems
    assert f"observation.images.wrist: video files missing for 1 episode(s): 3: {dataset / WRIST_1}" in problems
    assert f"{dataset / DATA_0}: unreadable parquet file" in problems


@pytest.mark.timeout(120)
def test_inspect_deep_cli_finds_a_damaged_stream(dataset: Path) -> None:
    clean = run_embodied("data", "inspect", str(dataset), "--deep", timeout=110)
    assert clean.returncode == 0 and "no problems found" in clean.stdout, clean.stdout + clean.stderr
    data = bytearray((dataset / FRONT_0).read_bytes())
    middle = len(data) // 2
    data[middle: middle + 4000] = np.random.default_rng(0).bytes(4000)  # garbage frames in the middle of episode 1
    (dataset / FRONT_0).write_bytes(bytes(data))
    result = run_embodied("data", "inspect", str(dataset), "--deep", "--json", timeout=110)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert [p for p in report["problems"] if str(dataset / FRONT_0) in p and "episode 1" in p], report["problems"]
    assert "Traceback" not in result.stderr


# ------------------------------------------------------------------ HDF5 preflight and spec modules
@pytest.mark.timeout(120)
def test_hdf5_missing_path_is_a_usage_error_before_the_model_is_built(tmp_path: Path) -> None:
    missing = tmp_path / "lift.hdf5"
    result = run_embodied("train", "--model-name", "tiny_flow_policy", "--dataset-format", "hdf5_datasets",
                          "--dataset-path", str(missing), "--output-dir", str(tmp_path / "out"), "--train-iters", "1",
                          timeout=110)
    assert result.returncode == 2, result.stderr
    assert f"--dataset-path {missing}: no such file or folder" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()  # nothing built, no config.yaml written


def test_hdf5_preflight_names_a_missing_key(tmp_path: Path) -> None:
    import attrs
    import h5py

    from embodied_core.config.model_config import BaseDataConfig
    from embodied_core.config.training_args import TrainingArgs

    path = tmp_path / "lift.hdf5"
    with h5py.File(path, "w") as f:
        demo = f.create_group("data/demo_0")
        demo.create_dataset("actions", data=np.zeros((4, 2)))
        demo.create_dataset("obs/robot0_eef_pos", data=np.zeros((4, 3)))
    spec = registry.get_spec("embodied.dataset_formats", "hdf5_datasets")
    args = attrs.evolve(TrainingArgs(), dataset_format="hdf5_datasets", dataset_path=str(path))
    problems = spec.run_preflight(args, BaseDataConfig(camera_keys=["observation.images.agentview"]))
    assert len(problems) == 1 and "has no 'observation.images.agentview'" in problems[0], problems


def test_each_format_spec_lives_in_a_specs_module_next_to_its_code() -> None:
    from importlib.metadata import distribution

    entry_points = [ep for ep in distribution("embodied-data").entry_points if ep.group.startswith("embodied.")]
    assert entry_points
    for ep in entry_points:
        module = ep.value.partition(":")[0]
        assert module.rsplit(".", 1)[-1] == "specs", ep
        package = module.rsplit(".", 1)[0]
        factory = registry.get_spec(ep.group, ep.name).factory.partition(":")[0]
        assert package in (factory, factory.rsplit(".", 1)[0]), (ep, factory)  # next to the code it describes
