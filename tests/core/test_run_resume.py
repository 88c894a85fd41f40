"""End to end through the Trainer API and the CLI: resume exactness and atomic checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from embodied_core.checkpoint import file_format as file_format_module
from embodied_core.checkpoint import find_latest
from embodied_core.trainer.api import Trainer
from tests.support import run_embodied


def _training(out: Path, **extra: Any) -> dict[str, Any]:
    base = {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", "dtype": "float32",
            "num_workers": 0, "per_device_batch_size": 4, "num_samples": 24, "output_dir": str(out),
            "lr_base": 1e-3, "lr_warmup_iters": 2, "lr_decay_iters": 8, "log_interval": 1, "seed": 11}
    return {**base, **extra}


def _losses(out: Path) -> list[tuple[int, float]]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [(record["step"], record["loss"]) for record in map(json.loads, lines)]


def test_resume_reproduces_the_uninterrupted_run_exactly(tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    Trainer({"training": _training(straight, train_iters=8, save_interval=4)}).train()
    split = tmp_path / "split"
    Trainer({"training": _training(split, train_iters=4, save_interval=4)}).train()
    result = Trainer({"training": _training(split, train_iters=8, save_interval=4, resume=True)}).train()
    assert result.step == 8
    assert _losses(split) == _losses(straight)  # bitwise equal floats, one line per step, no duplicates
    assert [step for step, _ in _losses(split)] == list(range(1, 9))


def test_resume_exact_through_cli_with_workers_and_accumulation(tmp_path: Path) -> None:
    """Real processes, DataLoader workers, gradient accumulation, bfloat16 autocast (the default dtype)."""
    common = ["train", "--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets",
              "--num-workers", "2", "--gradient-accumulation-steps", "2", "--per-device-batch-size", "3",
              "--num-samples", "40", "--lr-base", "1e-3", "--lr-warmup-iters", "1", "--lr-decay-iters", "6",
              "--save-interval", "3"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    for argv in ([*common, "--train-iters", "6", "--output-dir", str(straight)],
                 [*common, "--train-iters", "3", "--output-dir", str(split)],
                 [*common, "--train-iters", "6", "--output-dir", str(split), "--resume"]):
        result = run_embodied(*argv, timeout=240)
        assert result.returncode == 0, result.stderr
    assert _losses(split) == _losses(straight)
    assert "resumed from" in result.stderr


def test_interrupted_save_keeps_previous_checkpoint_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    Trainer({"training": _training(out, train_iters=2, save_interval=2)}).train()
    real_save = file_format_module.save_model_file

    def crash_after_writing(state: dict, directory: Path, fmt: str) -> Path:
        real_save(state, directory, fmt)
        raise KeyboardInterrupt("simulated crash before the rename")

    monkeypatch.setattr(file_format_module, "save_model_file", crash_after_writing)
    with pytest.raises(KeyboardInterrupt):
        Trainer({"training": _training(out, train_iters=4, save_interval=4, resume=True)}).train()
    root = out / "checkpoints"
    assert find_latest(root) == (root / "step_2").resolve()
    assert (root / "latest").resolve() == (root / "step_2").resolve()
    assert not (root / "step_4").exists()
    monkeypatch.setattr(file_format_module, "save_model_file", real_save)
    result = Trainer({"training": _training(out, train_iters=4, save_interval=4, resume=True)}).train()
    assert result.step == 4 and find_latest(root) == (root / "step_4").resolve()
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]  # the leftover was cleaned up


def test_trainer_api_equals_cli(tmp_path: Path) -> None:
    api_out, cli_out = tmp_path / "api", tmp_path / "cli"
    Trainer({"training": _training(api_out, train_iters=3, save_interval=0)}).train()
    argv = ["train", "--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets", "--dtype", "float32",
            "--num-workers", "0", "--per-device-batch-size", "4", "--num-samples", "24", "--output-dir",
            str(cli_out), "--lr-base", "1e-3", "--lr-warmup-iters", "2", "--lr-decay-iters", "8", "--seed", "11",
            "--train-iters", "3",
            "--save-interval", "0"]
    result = run_embodied(*argv, timeout=120)
    assert result.returncode == 0, result.stderr
    assert _losses(api_out) == _losses(cli_out)
