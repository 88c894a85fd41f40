"""data.image_augmentation settings: bad ones exit 2 naming the field (one run reports them all), good ones reach
the loader, --record-augmentation-draws writes what was applied, and policies never augment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch
import yaml

from embodied_core.config.image_augmentation import ImageAugmentationConfig
from embodied_core.config.resolve import load_config
from embodied_core.data.image_augmentation import augmentation_problems
from embodied_core.errors import ConfigError
from embodied_core.validation import validate_run_config
from tests.support import run_embodied

DUMMY = {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", "num_samples": 8, "dtype": "float32",
         "num_workers": 0, "per_device_batch_size": 2}


def _problems(**section: Any) -> list[str]:
    return augmentation_problems(ImageAugmentationConfig(**section), cameras=["observation.images.front"])


def test_bad_settings_exit_2_naming_each_field(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"training": {"model_name": "tiny_flow_policy"}, "data": {"image_augmentation": {
        "ops": [{"op": "colour_jitter"}, {"op": "color_jitter", "brightness": -0.5, "hue": [0.1, 0.7]},
                {"op": "random_crop", "scale": 0.9, "sharpnes": 2}],
        "exclude_cameras": ["wrist"]}}}))
    done = run_embodied("train", "--config-file", str(config), "--dataset-format", "dummy_datasets",
                        "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    err = done.stderr
    assert "Traceback" not in err
    for expected in ("data.image_augmentation.ops[0].op", "'colour_jitter'", "did you mean 'color_jitter'",
                     "data.image_augmentation.ops[1].brightness: must be >= 0",
                     "data.image_augmentation.ops[1].hue: [low, high] must satisfy -0.5 <= low <= high <= 0.5",
                     "data.image_augmentation.ops[2].sharpnes: unknown key",
                     "data.image_augmentation.exclude_cameras: 'wrist' is not a camera of the dataset (cameras: "
                     "front)"):
        assert expected in err, err


@pytest.mark.parametrize(("section", "message"), [
    ({"preset": "lerobt"}, "unknown data.image_augmentation.preset 'lerobt' in plugin group "
                           "embodied.image_augmentations"),
    ({"preset": "resize"}, "data.image_augmentation.preset: 'resize' is an op, not a preset"),
    ({"ops": [{"op": "lerobot"}]}, "data.image_augmentation.ops[0].op: 'lerobot' is a preset, not an op"),
    ({"ops": [{"brightness": 0.2}]}, "data.image_augmentation.ops[0]: expected a mapping with an 'op' key"),
    ({"preset": "lerobot", "max_num_ops": 0}, "data.image_augmentation.max_num_ops: must be >= 1 (got 0)"),
    ({"ops": [{"op": "resize", "weight": -1}]}, "data.image_augmentation.ops[0].weight: must be >= 0"),
    ({"ops": [{"op": "resize", "p": 1.5}]}, "data.image_augmentation.ops[0].p: must be in [0, 1]"),
    ({"ops": [{"op": "random_crop"}]}, "data.image_augmentation.ops[0].scale: give exactly one of size and scale"),
    ({"ops": [{"op": "random_affine", "translate": [0.5, 2.0]}]},
     "data.image_augmentation.ops[0].translate: both fractions must be in [0, 1]"),
    ({"ops": [{"op": "resize", "skip_cameras": "wrist"}]}, "data.image_augmentation.ops[0].skip_cameras: expected a "
                                                           "list"),
    ({"exclude_cameras": ["front"]}, "data.image_augmentation.exclude_cameras is set but no augmentation is"),
])
def test_each_bad_setting_names_its_field(section: dict[str, Any], message: str) -> None:
    problems = _problems(**section)
    assert any(message in p for p in problems), problems


def test_good_settings_and_overrides_resolve() -> None:
    assert _problems(preset="lerobot", exclude_cameras=["front"], max_num_ops=2) == []
    assert _problems(ops=[{"op": "color_jitter", "brightness": 0.3, "weight": 2, "skip_cameras": ["*wrist*"]}]) == []
    assert _problems() == []  # off


def test_record_draws_needs_an_augmentation_and_the_run_validates() -> None:
    config = load_config("tiny_flow_policy", training={**DUMMY, "record_augmentation_draws": 2}, environ={})
    with pytest.raises(ConfigError, match="--record-augmentation-draws 2: there is no augmentation to record"):
        validate_run_config(config, world_size=1)
    ok = load_config("tiny_flow_policy", training=DUMMY, data={"image_augmentation": {"preset": "groot"}}, environ={})
    validate_run_config(ok, world_size=1)


def test_training_records_draws_and_policies_never_augment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run with the lerobot preset: the draws file holds what the loader applied to its first samples, the
    policy folder records the resolved pipeline, and load_policy / predict_action (what embodied serve and embodied
    eval run) never call the augmentation."""
    from embodied_core.data.image_augmentation.pipeline import ImageAugmentation
    from embodied_core.policy.load import load_policy
    from embodied_core.trainer.api import Trainer

    out = tmp_path / "run"
    applied: list[int] = []
    augment = ImageAugmentation.augment

    def counting(self: ImageAugmentation, sample: dict[str, Any], **key: int) -> Any:
        applied.append(key["index"])
        return augment(self, sample, **key)

    monkeypatch.setattr(ImageAugmentation, "augment", counting)
    Trainer({"training": {**DUMMY, "train_iters": 1, "output_dir": str(out), "record_augmentation_draws": 3,
                          "save_interval": 1}, "data": {"image_augmentation": {"preset": "lerobot",
                                                                               "max_num_ops": 2}}}).train()
    assert len(applied) == 3 + 2  # the three recorded samples, then the batch of two the step trained on
    lines = [json.loads(line) for line in (out / "augmentation_draws.jsonl").read_text().splitlines()]
    assert lines[0]["settings"]["preset"] == "lerobot" and lines[0]["settings"]["max_num_ops"] == 2
    assert [line["index"] for line in lines[1:]] == applied[:3]
    for line in lines[1:]:
        ops = line["cameras"]["observation.images.front"]["ops"]
        assert line["epoch"] == 0 and len(ops) == 2 and all("params" in op for op in ops)
    folder = out / "checkpoints" / "step_1"
    record = json.loads((folder / "policy.json").read_text())["training_image_augmentation"]
    assert record["preset"] == "lerobot" and len(record["ops"]) == 6 and record["max_num_ops"] == 2

    def refuse(self: ImageAugmentation, sample: dict[str, Any], **key: int) -> Any:
        raise AssertionError("a policy augmented its observation")

    monkeypatch.setattr(ImageAugmentation, "augment", refuse)
    policy = load_policy(folder, device="cpu")
    observation = {"observation.images.front": torch.full((3, 64, 64), 120, dtype=torch.uint8),
                   "observation.state": torch.zeros(8), "task": "t"}
    assert policy.predict_action(observation).shape == (8, 8)


def test_preview_writes_the_grid_and_refuses_bad_settings(tmp_path: Path) -> None:
    from PIL import Image

    from tests.support import DATASETS_DIR

    dataset = DATASETS_DIR / "lerobot_written" / "v30"
    out = tmp_path / "grid.png"
    done = run_embodied("data", "preview", str(dataset), "--image-augmentation", "lerobot", "--samples", "3",
                        "--out", str(out))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["sample 0", "sample 60", "sample 119"]
    assert all("front: " in line and "wrist: " in line and "_factor=" in line for line in lines[:3])
    # 3 rows of (front 120 x 160 | augmented | wrist 72 x 96 | augmented), 4 px gaps
    assert Image.open(out).size == (2 * 160 + 2 * 96 + 5 * 4, 3 * 120 + 4 * 4)
    bad = run_embodied("data", "preview", str(dataset), "--image-augmentation", "lerobt", "--out", str(out))
    assert bad.returncode == 2 and "did you mean 'lerobot'" in bad.stderr, bad.stderr
    cameras = run_embodied("data", "preview", str(dataset), "--image-augmentation", "lerobot", "--cameras", "wirst",
                           "--out", str(out))
    assert cameras.returncode == 2 and "--cameras wirst: not a camera of the dataset" in cameras.stderr


@attrs.define(kw_only=True)
class InvertParams:
    """Parameters of the test's own op."""

    p_invert: float = attrs.field(default=1.0)
    """Unused: a parameter so the strict structure has a key to check."""


class _Invert:
    size_dependent = False

    def draw(self, frames: torch.Tensor, *, input_size: tuple[int, int]) -> dict[str, Any]:
        return {"noise": torch.rand(()).item()}

    def apply(self, frames: torch.Tensor, params: Any) -> torch.Tensor:
        return 255 - frames


def build_invert(params: InvertParams) -> _Invert:
    """Factory of the test's ``invert`` op."""
    return _Invert()


def test_a_plugin_op_is_used_without_touching_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    """An op registered as a plugin (here in-process; a package would declare the entry point) is selected by
    name, its parameters checked like the built-in ones."""
    from embodied_core import registry
    from embodied_core.data.image_augmentation import build_ops, resolve_augmentation
    from embodied_core.data.image_augmentation.pipeline import ImageAugmentation
    from embodied_core.registry.specs import ImageOpSpec

    spec = ImageOpSpec(name="invert", factory=f"{__name__}:build_invert", params=InvertParams)
    registry.register("embodied.image_augmentations", "invert", spec, replace=True)
    try:
        assert "unknown key" in " ".join(_problems(ops=[{"op": "invert", "strength": 2}]))
        settings = resolve_augmentation(ImageAugmentationConfig(ops=[{"op": "invert"}, {"op": "color_jitter",
                                                                                         "brightness": 0.2}]))
        assert settings is not None
        augmentation = ImageAugmentation(settings, build_ops(settings), seed=1)
        frames = torch.full((3, 8, 8), 10, dtype=torch.uint8)
        out, applied = augmentation.augment({"observation.images.front": frames}, epoch=0, index=0)
        assert [op["op"] for op in applied["observation.images.front"]] == ["invert", "color_jitter"]
        assert out["observation.images.front"].float().mean() > 150  # inverted, then jittered by +-20 %
    finally:
        registry.unregister("embodied.image_augmentations", "invert")


def test_shared_draws_need_cameras_of_the_size_an_op_was_drawn_on() -> None:
    from embodied_core.data.image_augmentation import build_ops, resolve_augmentation
    from embodied_core.data.image_augmentation.pipeline import ImageAugmentation
    from embodied_core.errors import DataError

    sample = {"observation.images.front": torch.zeros(3, 120, 160, dtype=torch.uint8),
              "observation.images.wrist": torch.zeros(3, 72, 96, dtype=torch.uint8)}
    for preset, fits in (("dreamzero", False), ("groot", True)):  # groot resizes every camera to 256 x 256 first
        settings = resolve_augmentation(ImageAugmentationConfig(preset=preset))
        assert settings is not None
        augmentation = ImageAugmentation(settings, build_ops(settings), seed=1)
        if fits:
            out, _ = augmentation.augment(sample, epoch=0, index=0)
            assert {tuple(v.shape) for v in out.values()} == {(3, 256, 256)}
        else:
            with pytest.raises(DataError, match=r"shared replays the random_crop drawn on frames of \[120, 160\].*"
                                                r"'observation.images.wrist', whose frames are \[72, 96\]"):
                augmentation.augment(sample, epoch=0, index=0)
    with pytest.raises(DataError, match="holds none of the cameras"):
        augmentation.augment({"video": torch.zeros(3, 2, 8, 8, dtype=torch.uint8)}, epoch=0, index=0)


def test_deterministic_mode_seeds_by_sample_index_where_the_reference_does() -> None:
    """cosmos3 (LoongForge: torch.manual_seed(idx) under --deterministic-mode) draws from the index alone, the same
    every epoch; lerobot keeps the (seed, epoch, index) key; without --deterministic-mode both use the key."""
    from embodied_core.data.image_augmentation import build_image_augmentation

    keys = {}
    for preset in ("cosmos3", "lerobot"):
        for deterministic in (True, False):
            config = load_config("tiny_flow_policy", training={**DUMMY, "deterministic_mode": deterministic},
                                 data={"image_augmentation": {"preset": preset}}, environ={})
            augmentation = build_image_augmentation(config)
            assert augmentation is not None
            keys[preset, deterministic] = [augmentation.sample_key(epoch=e, index=5) for e in (0, 3)]
    assert keys["cosmos3", True] == [5, 5]
    for other in (("cosmos3", False), ("lerobot", True), ("lerobot", False)):
        assert keys[other][0] != keys[other][1] and 5 not in keys[other]


def test_without_torchvision_the_run_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util
    import sys

    from embodied_core.data.image_augmentation import run_problems
    from embodied_core.errors import UsageError
    from embodied_data.augment import _torchvision

    config = load_config("tiny_flow_policy", training=DUMMY, data={"image_augmentation": {"preset": "lerobot"}},
                         environ={})
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchvision" else real(name, *a))
    problems = run_problems(config)
    assert problems and all("needs the package(s) torchvision" in p and "embodied-data[augment]" in p
                            for p in problems), problems
    monkeypatch.setattr(importlib.util, "find_spec", real)
    _torchvision._import.cache_clear()
    monkeypatch.setitem(sys.modules, "torchvision.transforms.v2", None)  # import raises ModuleNotFoundError
    try:
        with pytest.raises(UsageError, match=r"needs torchvision, which is not installed: pip install "
                                             r"'embodied-data\[augment\]'"):
            _torchvision.transforms_v2()
    finally:
        _torchvision._import.cache_clear()
