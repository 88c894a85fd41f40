"""Checkpoint options: formats and resume exactness, keep-last-K, weights-only saves, --pretrained-checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from embodied_core.checkpoint import find_latest, read_meta
from embodied_core.checkpoint.file_format import load_model_file
from embodied_core.checkpoint.pretrained import load_pretrained
from embodied_core.errors import CheckpointError, ConfigError
from embodied_core.trainer.api import Trainer
from tests.core.trainer_support import build, losses, training


@pytest.mark.parametrize("fmt", ["safetensors", "pt"])
def test_resume_equals_the_uninterrupted_run_for_each_format(tmp_path: Path, fmt: str) -> None:
    straight, split = tmp_path / "straight", tmp_path / "split"
    common = {"save_interval": 3, "save_format": fmt, "gradient_accumulation_steps": 2}
    Trainer({"training": training(straight, train_iters=6, **common)}).train()
    Trainer({"training": training(split, train_iters=3, **common)}).train()
    result = Trainer({"training": training(split, train_iters=6, resume=True, **common)}).train()
    assert result.step == 6
    assert losses(split) == losses(straight)  # bitwise-equal floats
    step_dir = split / "checkpoints" / "step_6"
    assert read_meta(step_dir)["format"] == fmt
    assert (step_dir / ("model.safetensors" if fmt == "safetensors" else "model.pt")).is_file()
    weights = load_model_file(step_dir)
    assert all(torch.equal(weights[k], v) for k, v in load_model_file(straight / "checkpoints/step_6").items())


def test_save_total_limit_keeps_the_newest_k(tmp_path: Path) -> None:
    Trainer({"training": training(tmp_path, train_iters=5, save_interval=1, save_total_limit=2)}).train()
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_4", "step_5"]
    assert find_latest(root) == (root / "step_5").resolve()


def test_save_interval_zero_writes_no_checkpoint(tmp_path: Path) -> None:
    result = Trainer({"training": training(tmp_path, train_iters=2, save_interval=0)}).train()
    assert result.checkpoint is None and not (tmp_path / "checkpoints").exists()


def test_weights_only_checkpoint_cannot_be_resumed_but_can_initialize(tmp_path: Path) -> None:
    run = tmp_path / "run"
    Trainer({"training": training(run, train_iters=2, save_interval=2, save_training_state=False)}).train()
    step_dir = run / "checkpoints" / "step_2"
    names = {p.name for p in step_dir.iterdir()}
    assert {"meta.json", "model.safetensors"} <= names and "training_state" not in names
    with pytest.raises(CheckpointError, match=r"holds weights only .* Use it as --pretrained-checkpoint instead"):
        Trainer({"training": training(run, train_iters=4, save_interval=2, resume=True)}).train()
    trainer = build(tmp_path / "init", pretrained_checkpoint=str(step_dir))
    trainer.setup()
    state = trainer.model.state_dict()
    trainer.close()
    assert all(torch.equal(state[k], v) for k, v in load_model_file(step_dir).items())


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trained")
    Trainer({"training": training(out, train_iters=2, save_interval=2, save_format="pt")}).train()
    return out


def _model(tmp_path: Path) -> torch.nn.Module:
    trainer = build(tmp_path)
    return trainer.build_model()


@pytest.mark.parametrize("source", ["run_dir", "checkpoints_dir", "step_dir", "pt_file", "safetensors_file"])
def test_pretrained_sources(trained: Path, tmp_path: Path, source: str) -> None:
    step_dir = trained / "checkpoints" / "step_2"
    expected = load_model_file(step_dir)
    paths = {"run_dir": trained, "checkpoints_dir": trained / "checkpoints", "step_dir": step_dir,
             "pt_file": step_dir / "model.pt", "safetensors_file": tmp_path / "weights.safetensors"}
    save_file(expected, str(tmp_path / "weights.safetensors"))
    model = _model(tmp_path)
    report = load_pretrained(model, paths[source])
    assert report.ok and len(report.loaded) == len(expected)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in expected.items())


def test_pretrained_strict_report_lists_missing_unexpected_and_mismatched(trained: Path, tmp_path: Path) -> None:
    state = load_model_file(trained / "checkpoints" / "step_2")
    state.pop("head.0.bias")
    state["extra.weight"] = torch.zeros(2)
    state["head.4.weight"] = torch.zeros(3, 3)
    path = tmp_path / "bad.safetensors"
    save_file(state, str(path))
    with pytest.raises(CheckpointError) as info:
        load_pretrained(_model(tmp_path), path)
    message = str(info.value)
    assert "3 problem(s)" in message and str(path) in message
    assert "missing: head.0.bias" in message
    assert "unexpected: extra.weight" in message
    assert "shape mismatch: head.4.weight (model (64, 256), checkpoint head.4.weight (3, 3))" in message


class NotATensor:
    """Unpickling this needs code execution, which weights_only loading refuses."""


def test_pretrained_never_unpickles_code(tmp_path: Path) -> None:
    path = tmp_path / "evil.pt"
    torch.save({"weight": NotATensor()}, path)
    with pytest.raises(CheckpointError, match="weights_only=True"):
        load_pretrained(_model(tmp_path), path)


def test_pretrained_path_is_checked_at_validation(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--pretrained-checkpoint .*missing\.pt: no such file or directory"):
        Trainer({"training": training(tmp_path, pretrained_checkpoint=str(tmp_path / "missing.pt"))})


def test_pretrained_mismatch_fails_before_training(tmp_path: Path, trained: Path) -> None:
    other = Trainer({"training": training(tmp_path / "run", pretrained_checkpoint=str(trained)),
                     "model": {"hidden_dim": 128}})
    with pytest.raises(CheckpointError, match="shape mismatch"):
        other.train()
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
