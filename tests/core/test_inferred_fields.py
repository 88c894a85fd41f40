"""Data fields left unset come from the dataset's metadata; set ones that disagree are errors; resuming with
another --train-iters and no --lr-decay-iters warns about the changed LR schedule."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from embodied_core import registry
from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError
from embodied_core.registry import DatasetFormatSpec, groups
from embodied_core.trainer.api import Trainer
from tests.support import DATASETS_DIR, run_embodied

V30 = DATASETS_DIR / "lerobot_written" / "v30"
CAMERAS = ["observation.images.front", "observation.images.wrist"]


def test_the_readme_command_trains_without_dims_and_saves_the_inferred_values(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_embodied("train", "--model-name", "pi05_tiny", "--dataset-path", str(V30),
                          "--train-iters", "2", "--output-dir", str(out), timeout=240)
    assert result.returncode == 0, result.stderr
    assert "data fields from" in result.stderr and "state_dim=7, action_dim=4" in result.stderr
    data = yaml.safe_load((out / "config.yaml").read_text())["data"]
    assert (data["state_dim"], data["action_dim"], data["camera_keys"]) == (7, 4, CAMERAS)
    assert data["state_names"] == [f"s{i}" for i in range(7)] and data["action_names"] == [f"a{i}" for i in range(4)]
    assert (out / "checkpoints" / "step_2").is_dir()
    again = load_config(config_file=str(out / "config.yaml"), environ={})  # --config-file config.yaml reproduces
    assert (again.data.state_dim, again.data.action_dim, again.data.camera_keys) == (7, 4, CAMERAS)


def test_an_explicit_value_that_disagrees_is_an_error_naming_field_value_and_dataset(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_embodied("train", "--model-name", "pi05_tiny", "--dataset-path", str(V30), "--train-iters", "2",
                          "--output-dir", str(out), "data.state_dim=8", "--data.action-names", "x", "y", "z", "w")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"data.state_dim=8 but 'observation.state' of {V30} has 7 values per frame; set data.state_dim=7" \
        in result.stderr
    assert "data.action_names=['x', 'y', 'z', 'w']" in result.stderr and "['a0', 'a1', 'a2', 'a3']" in result.stderr
    assert not out.exists()  # reported before anything is written
    with pytest.raises(ConfigError, match=r"data\.action_dim=3 but 'action'"):
        load_config("pi05_tiny", training={"dataset_path": str(V30)}, data={"action_dim": 3}, environ={})


def test_set_values_that_agree_are_kept_and_unset_ones_filled() -> None:
    config = load_config("pi05_tiny", training={"dataset_path": str(V30)},
                         data={"camera_keys": ["observation.images.wrist"], "action_dim": 4}, environ={})
    assert config.data.camera_keys == ["observation.images.wrist"]  # a chosen subset of the cameras stays
    assert (config.data.state_dim, config.data.action_dim) == (7, 4)


def test_robot_layout_gives_the_canonical_names() -> None:
    config = load_config("pi05_tiny", training={"dataset_path": str(V30), "robot_type": "synthetic_arm"}, environ={})
    assert config.data.state_names == [f"s{i}" for i in range(7)] and config.data.action_dim == 4
    with pytest.raises(ConfigError, match=r"--robot-type synthetic_arm\) has 7 values per frame"):
        load_config("pi05_tiny", training={"dataset_path": str(V30), "robot_type": "synthetic_arm"},
                    data={"state_dim": 5}, environ={})


def test_generated_and_hdf5_datasets_report_their_shapes(tmp_path: Path) -> None:
    dummy = load_config("tiny_flow_policy", training={"dataset_format": "dummy_datasets"}, environ={})
    assert (dummy.data.state_dim, dummy.data.action_dim, dummy.data.camera_keys) == (8, 8, ["observation.images.front"])
    chosen = load_config("tiny_flow_policy", training={"dataset_format": "dummy_datasets"},
                         data={"state_dim": 3, "camera_keys": ["observation.images.a", "observation.images.b"]},
                         environ={})
    assert (chosen.data.state_dim, chosen.data.action_dim) == (3, 8)  # a generated dataset follows what is set

    import h5py

    path = tmp_path / "demo.hdf5"
    with h5py.File(path, "w") as h5:
        demo = h5.create_group("data/demo_0")
        demo.create_dataset("actions", data=np.zeros((6, 5), np.float32))
        demo.create_dataset("obs/eef_pos", data=np.zeros((6, 3), np.float32))
        demo.create_dataset("obs/agentview_image", data=np.zeros((6, 8, 8, 3), np.uint8))
    hdf5 = load_config("tiny_flow_policy", training={"dataset_format": "hdf5_datasets", "dataset_path": str(path)},
                       environ={})
    assert (hdf5.data.state_dim, hdf5.data.action_dim) == (3, 5)
    assert hdf5.data.camera_keys == ["observation.images.agentview"]
    with pytest.raises(ConfigError, match=r"data\.action_dim=4 but 'action' of .*demo\.hdf5 \(robomimic layout\)"):
        load_config("tiny_flow_policy", training={"dataset_format": "hdf5_datasets", "dataset_path": str(path)},
                    data={"action_dim": 4}, environ={})


def test_a_format_that_cannot_infer_names_each_unset_field(tmp_path: Path) -> None:
    spec = DatasetFormatSpec(name="opaque_frames", factory="embodied_data.formats.dummy:build_dummy_dataset",
                             uses_flags=("num_samples",), needs_path=False)
    registry.register(groups.DATASET_FORMATS, "opaque_frames", spec)
    try:
        with pytest.raises(ConfigError) as err:
            Trainer({"training": {"model_name": "tiny_flow_policy", "dataset_format": "opaque_frames",
                                  "output_dir": str(tmp_path / "run")}, "data": {"action_dim": 2}})
    finally:
        registry.unregister(groups.DATASET_FORMATS, "opaque_frames")
    message = str(err.value)
    assert "data.camera_keys is not set" in message and "data.state_dim is not set" in message
    assert "data.action_dim" not in message and not (tmp_path / "run").exists()


def _training(out: Path, **extra: Any) -> dict[str, Any]:
    return {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", "dtype": "float32",
            "num_workers": 0, "per_device_batch_size": 2, "num_samples": 8, "output_dir": str(out),
            "lr_warmup_iters": 1, "log_interval": 1, "save_interval": 2, **extra}


def test_resuming_with_other_train_iters_warns_about_the_lr_schedule(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "run"
    Trainer({"training": _training(out, train_iters=2)}).train()
    with caplog.at_level(logging.WARNING, logger="embodied.train"):
        Trainer({"training": _training(out, train_iters=4, resume=True)}).train()
    warnings = [r.getMessage() for r in caplog.records if "LR schedule" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    assert "was 2 steps long" in warnings[0] and "is now 4" in warnings[0]
    assert "pass --lr-decay-iters 2" in warnings[0]
    caplog.clear()
    kept = tmp_path / "kept"
    Trainer({"training": _training(kept, train_iters=2)}).train()
    with caplog.at_level(logging.WARNING, logger="embodied.train"):
        Trainer({"training": _training(kept, train_iters=4, lr_decay_iters=2, resume=True)}).train()
    assert not [r for r in caplog.records if "LR schedule" in r.getMessage()]
