"""Bad dataset-mixture files: exit code 2 from the real ``embodied train`` CLI, one line per problem, each naming the
entry (``data_mixture.entries[i] (path)``) and the field. The rules checked later (plugins, the model's own width
checks, the entries' metadata, batching) go through the Trainer API in-process, which raises the same UsageError
(exit 2 on the CLI) but shares this process's model imports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from embodied_core.errors import UsageError
from embodied_core.trainer.api import Trainer
from tests.support import DATASETS_DIR, run_embodied

V30 = DATASETS_DIR / "lerobot_written" / "v30"
V21 = DATASETS_DIR / "lerobot_written" / "v21"
G1 = DATASETS_DIR / "g1_inspire_v21"
LINGZU = DATASETS_DIR / "lingzu_pi05_v30"


def _train(tmp_path: Path, mixture: dict[str, Any], *extra: str, model: str = "pi05_tiny"):
    file = tmp_path / "mix.yaml"
    file.write_text(yaml.safe_dump(mixture))
    return run_embodied("train", "--model-name", model, "--dataset-mixture", str(file), "--train-iters", "1",
                        "--num-workers", "0", "--output-dir", str(tmp_path / "out"), *extra, timeout=240)


def _lines(result: Any) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


def test_structure_problems_are_reported_together_each_naming_its_entry(tmp_path: Path) -> None:
    err = _lines(_train(tmp_path, {"entries": [
        {"path": str(V30), "weight": 0},
        {"path": str(V21), "weight": -1.5},
        {"path": str(V21), "wieght": 2},
        {"path": str(V21), "lerobotdataset_version": "v2.2"},
        {"path": str(V21), "episodes": "0-1", "split": "train"},
    ], "weighting": "uniform"}))
    assert f"data_mixture.entries[0] ({V30}): weight must be a finite number > 0 (got 0.0)" in err
    assert f"data_mixture.entries[1] ({V21}): weight must be a finite number > 0 (got -1.5)" in err
    assert "data_mixture.entries[2].wieght: unknown key (did you mean 'weight'?)" in err
    assert "data_mixture.entries[3].lerobotdataset_version: expected one of 'v2.0', 'v2.1', 'v3.0'" in err
    assert "data_mixture.weighting: must be one of 'dataset', 'frames', 'trajectory'" in err


def test_missing_paths_and_empty_globs_name_the_entry(tmp_path: Path) -> None:
    err = _lines(_train(tmp_path, {"entries": [
        {"path": str(V30)}, {"path": "no_such_dataset"}, {"path": str(DATASETS_DIR / "lerobot_written" / "v9*")}]}))
    assert f"data_mixture.entries[1] (no_such_dataset): path {tmp_path / 'no_such_dataset'} does not exist" in err
    assert f"data_mixture.entries[2] ({DATASETS_DIR / 'lerobot_written' / 'v9*'}): the glob" in err
    assert "matches nothing" in err


def _trainer_error(tmp_path: Path, mixture: dict[str, Any], *, model: str = "pi05_tiny", **training: Any) -> str:
    file = tmp_path / "mix.yaml"
    file.write_text(yaml.safe_dump(mixture))
    flags = {"model_name": model, "dataset_mixture": str(file), "train_iters": 1, "num_workers": 0,
             "output_dir": str(tmp_path / "out"), **training}
    with pytest.raises(UsageError) as info:
        Trainer({"training": flags}).train()
    return str(info.value)


def test_unknown_plugins_and_unmappable_widths_are_reported_before_any_dataset_is_read(tmp_path: Path) -> None:
    err = _trainer_error(tmp_path, {"entries": [
        {"path": str(V30), "dataset_strategy": "defualt"},
        {"path": str(V21), "lerobotdataset_version": "v2.1", "video_backend": "vlc"},
        {"path": str(LINGZU), "episodes": "3-4", "data": {"state_key": "state", "action_key": "actions",
                                                          "camera_keys": ["image"]}},
    ]})
    assert f"data_mixture.entries[0] ({V30}): dataset_strategy: unknown dataset_strategy 'defualt'" in err
    assert "(did you mean 'default'?)" in err
    assert f"data_mixture.entries[1] ({V21}): video_backend: unknown video_backend 'vlc'" in err
    # lingzu's 34-dim state and actions do not fit pi05_tiny's max_state_dim / max_action_dim of 32
    lingzu = [line for line in err.splitlines() if f"data_mixture.entries[2] ({LINGZU})" in line]
    assert any("state" in line and "34" in line and "32" in line for line in lingzu), err
    assert any("action" in line and "34" in line and "32" in line for line in lingzu), err


def test_entry_preflight_names_the_version_mismatch_and_a_dataset_path_conflicts(tmp_path: Path) -> None:
    err = _trainer_error(tmp_path, {"entries": [{"path": str(V30)}, {"path": str(V21)}]})
    assert f"data_mixture.entries[1] ({V21}):" in err and "v2.1" in err
    err = _trainer_error(tmp_path, {"entries": [{"path": str(V30)}]}, dataset_path=str(V30))
    assert "--dataset-path" in err and "exclude each other" in err


def test_entries_the_model_cannot_batch_together_fail_before_the_model_is_built(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # GR00T stacks every view of a sample: 2 cameras and 1 camera make images of different shapes
    caplog.set_level("INFO")
    err = _trainer_error(tmp_path, {"entries": [
        {"path": str(V30)}, {"path": str(G1), "episodes": "10-11", "lerobotdataset_version": "v2.1"}]},
        model="groot_n1_7_tiny", video_backend="pyav")
    assert f"data_mixture.entries[1] ({G1}): its samples cannot be batched with data_mixture.entries[0]" in err
    assert "'images': (1, 3, 32, 32) uint8 here, (2, 3, 32, 32) uint8 in data_mixture.entries[0]" in err
    assert "trainable" not in caplog.text  # the model's parameter summary was never logged: it was not built


def test_a_models_own_embodiment_tags_select_its_embodiment(tmp_path: Path) -> None:
    from embodied_core.config.mixture_resolve import entry_data_config
    from embodied_core.config.resolve import load_config

    file = tmp_path / "mix.yaml"
    file.write_text(yaml.safe_dump({"entries": [
        {"path": str(V30), "embodiment": "unitree_g1_sonic"}, {"path": str(V30), "embodiment": "lingzu"},
        {"path": str(V30), "embodiment": "libero_sim", "data": {"embodiment_tag": "unitree_g1_sonic"}}]}))
    config = load_config("groot_n1_7_tiny", training={"dataset_mixture": str(file)})
    tags = [entry_data_config(config, i).embodiment_tag for i in range(3)]
    # a GR00T tag selects its slot; another tag only names the statistics; an explicit data: override wins
    assert tags == ["unitree_g1_sonic", "new_embodiment", "unitree_g1_sonic"]
