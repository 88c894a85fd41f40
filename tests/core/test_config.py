"""Configuration: the five precedence layers, strict structuring, validation and config.yaml round trip."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import yaml

from embodied_core import registry
from embodied_core.cli.train import parse_train_argv
from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError, NotSupportedYetError, UsageError
from embodied_core.registry import ModelSpec, groups
from embodied_core.validation import validate_run_config


@attrs.define(kw_only=True)
class LayeredModelConfig(BaseModelConfig):
    """Model section of the layering test model."""

    hidden_dim: int = 8
    """Width."""
    dropout: float = 0.0
    """Dropout."""
    use_bias: bool = True
    """Bias."""


@pytest.fixture
def layered_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An in-process model plugin whose default YAML sets values in all three sections."""
    package = tmp_path / "layered_pkg"
    package.mkdir()
    # validation imports the factory the spec names (a broken one fails before anything is built)
    (package / "__init__.py").write_text("import torch\n\ndef build(model, data):\n    return torch.nn.Linear(1, 1)\n")
    (package / "defaults.yaml").write_text(textwrap.dedent("""
        training:
          train_iters: 10
          seed: 7
        model:
          hidden_dim: 16
        data:
          action_horizon: 4
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = ModelSpec(name="layered", factory="layered_pkg:build", model_config=LayeredModelConfig,
                     data_config=BaseDataConfig, default_yaml="layered_pkg:defaults.yaml")
    registry.register(groups.MODELS, "layered", spec)
    yield "layered"
    registry.unregister(groups.MODELS, "layered")
    sys.modules.pop("layered_pkg", None)


def test_attrs_defaults_then_model_yaml(layered_model: str) -> None:
    config = parse_train_argv(["--model-name", layered_model], environ={})
    assert config.training.train_iters == 10  # YAML beats the attrs default 150000
    assert config.training.lr_base == 2.5e-5  # untouched attrs default
    assert (config.model.hidden_dim, config.data.action_horizon) == (16, 4)


def test_every_layer_beats_the_one_below(layered_model: str, tmp_path: Path) -> None:
    config_file = tmp_path / "run.yaml"
    config_file.write_text("training:\n  train_iters: 11\nmodel:\n  hidden_dim: 32\n  dropout: 0.1\n")
    argv = ["--model-name", layered_model, "--config-file", str(config_file)]
    config = parse_train_argv(argv, environ={})
    assert (config.training.train_iters, config.model.hidden_dim, config.training.seed) == (11, 32, 3047)
    # --config-file replaces the model's YAML: its seed 7 is gone, the attrs default is back

    env = {"EMBODIED_TRAIN_ITERS": "20", "EMBODIED_RESUME": "true"}
    config = parse_train_argv(argv, environ=env)
    assert (config.training.train_iters, config.training.resume) == (20, True)

    argv += ["training.train_iters=30", "model.hidden_dim=64", "model.use_bias=false"]
    config = parse_train_argv(argv, environ=env)
    assert (config.training.train_iters, config.model.hidden_dim, config.model.use_bias) == (30, 64, False)

    argv += ["--train-iters", "40", "--model.hidden-dim", "128", "--no-resume"]
    config = parse_train_argv(argv, environ=env)
    assert (config.training.train_iters, config.model.hidden_dim, config.training.resume) == (40, 128, False)
    assert config.model.dropout == 0.1  # only from the config file


def test_flag_value_that_looks_like_a_dotlist_item_stays_a_flag_value(layered_model: str) -> None:
    config = parse_train_argv(["--model-name", layered_model, "--lr-group", "model.x=1e-4", "data.action_horizon=9"],
                              environ={})
    assert config.training.lr_group == "model.x=1e-4" and config.data.action_horizon == 9


def test_strict_errors_are_reported_together(layered_model: str, tmp_path: Path) -> None:
    config_file = tmp_path / "bad.yaml"
    config_file.write_text(textwrap.dedent("""
        training:
          train_iter: 5
          resume: "false"
          per_device_batch_size: 0
          num_workers: 2.5
        model:
          hidden_dim: 1.5
          hiden: 3
    """))
    with pytest.raises(ConfigError) as info:
        load_config(layered_model, config_file=str(config_file), environ={})
    problems = "\n".join(info.value.problems)
    assert "training.train_iter: unknown key (did you mean 'train_iters'?)" in problems
    assert "training.resume: expected true or false, got 'false' (str)" in problems  # no silent "false" -> True
    assert "training.per_device_batch_size: must be > 0 (got 0)" in problems  # a failed validator
    assert "training.num_workers: expected an integer, got 2.5 (float)" in problems  # no float -> int truncation
    assert "model.hidden_dim: expected an integer, got 1.5 (float)" in problems
    assert "model.hiden: unknown key (did you mean 'hidden_dim'?)" in problems
    assert len(info.value.problems) == 6


def test_environment_typos_are_errors(layered_model: str) -> None:
    with pytest.raises(ConfigError, match=r"EMBODIED_TRAIN_ITER: names no flag --train-iter.*train_iters"):
        load_config(layered_model, environ={"EMBODIED_TRAIN_ITER": "3"})
    with pytest.raises(ConfigError, match=r"training.train_iters: expected an integer, got 'ten'"):
        load_config(layered_model, environ={"EMBODIED_TRAIN_ITERS": "ten"})


def test_unknown_model_and_missing_model(layered_model: str) -> None:
    with pytest.raises(UsageError, match=r"did you mean 'layered'"):
        load_config("layerd", environ={})
    with pytest.raises(UsageError, match=r"--model-name is required; installed models: .*layered"):
        load_config(environ={})


def test_validation_reports_plugins_and_cross_field_rules(layered_model: str) -> None:
    config = load_config(layered_model, environ={}, training={
        "optimizer": "adamw", "dataset_format": "dummy_datasets", "video_backend": "pyav",
        "lr_group": "vision=fast", "resume": True, "resume_from": "/x", "lr_warmup_iters": 100,
        "lr_decay_iters": 10, "tokenizer_path": "/tok"})
    with pytest.raises(ConfigError) as info:
        validate_run_config(config, world_size=1)
    problems = "\n".join(info.value.problems)
    assert "unknown --optimizer 'adamw'" in problems and "did you mean 'AdamW'" in problems
    assert "--video-backend: not read by --dataset-format dummy_datasets" in problems  # never silently ignored
    assert "--lr-group: 'vision=fast': learning rate 'fast' is not a number" in problems
    assert "--resume and --resume-from exclude each other" in problems
    assert "--lr-decay-iters 10 is shorter than --lr-warmup-iters 100" in problems
    assert "--tokenizer-path: not read by --model-name layered" in problems  # a dead option is an error


def test_not_yet_supported_values_fail_clearly(layered_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from embodied_core.config import validate

    monkeypatch.setitem(validate.NOT_SUPPORTED_YET, "streaming", (lambda v: v is True, "a later feature"))
    config = load_config(layered_model, environ={}, training={"dataset_format": "dummy_datasets",
                                                              "streaming": True})
    monkeypatch.setattr(validate, "FORMAT_SPECIFIC_FLAGS", ())
    with pytest.raises(NotSupportedYetError, match=r"--streaming True: not supported yet .*a later feature"):
        validate_run_config(config, world_size=1)


def test_config_yaml_round_trip(tmp_path: Path) -> None:
    """The written config.yaml reproduces the run when passed back as --config-file."""
    from embodied_core.trainer.api import Trainer

    out = tmp_path / "run"
    training = {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", "train_iters": 2,
                "dtype": "float32", "num_workers": 0, "per_device_batch_size": 2, "output_dir": str(out),
                "save_interval": 0, "lr_warmup_iters": 0, "num_samples": 8}
    first = Trainer({"training": training, "model": {"hidden_dim": 32}}).train()
    doc = yaml.safe_load((out / "config.yaml").read_text())
    assert doc["embodied"]["versions"]["embodied-core"]
    assert doc["embodied"]["plugins"]["embodied.models/tiny_flow_policy"].startswith("embodied-plugin-template")
    again = load_config(config_file=str(out / "config.yaml"), environ={})
    assert again.training.train_iters == 2 and again.model.hidden_dim == 32
    second = Trainer(again).train()
    assert second.last_metrics["loss"] == first.last_metrics["loss"]


def test_flag_value_spellings_of_flags_md(layered_model: str) -> None:
    """``--flag true``/``--flag=false``/``--no-flag``, ``none`` for optional values, tri-state reshard values."""
    argv = ["--model-name", layered_model, "--resume", "true", "--save-training-state=false", "--no-streaming",
            "model.hidden_dim=4", "--lr-decay-iters", "none", "--fsdp-reshard-default", "2",
            "--fsdp-reshard-root=none", "--hsdp-shard-size", "auto", "--model.use-bias", "false"]
    config = parse_train_argv(argv, environ={})
    training = config.training
    assert (training.resume, training.save_training_state, training.streaming) == (True, False, False)
    assert (training.lr_decay_iters, training.fsdp_reshard_default, training.fsdp_reshard_root) == (None, 2, None)
    assert training.hsdp_shard_size == "auto"
    assert (config.model.hidden_dim, config.model.use_bias) == (4, False)  # the bool flag did not eat the dotlist
    for spelling, expected in (("true", True), ("False", False), ("none", None)):
        config = parse_train_argv(["--model-name", layered_model, "--fsdp-reshard-default", spelling], environ={})
        assert config.training.fsdp_reshard_default is expected
