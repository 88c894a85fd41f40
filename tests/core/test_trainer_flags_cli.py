"""The trainer's flags through the real `embodied train` command line (parsing, validation, effect)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.trainer_support import metrics
from tests.support import run_embodied

BASE = ["train", "--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets", "--num-workers", "0",
        "--num-samples", "24", "--per-device-batch-size", "4", "--lr-base", "1e-3"]


@pytest.mark.timeout(300)
def test_many_trainer_flags_at_once(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_embodied(
        *BASE, "--output-dir", str(out), "--train-iters", "4", "--dtype", "float16",
        "--optimizer", "TorchFusedAdamW", "--lr-decay-style", "lambda_linear", "--lr-warmup-iters", "1",
        "--lambda-cycle-length", "3", "--lambda-f-start", "0.5", "--lambda-f-max", "1", "--lambda-f-min", "0.001",
        "--lr-group", "head.4=1e-2,head=1e-4",
        "--weight-decay-grouping", "bias_norm", "--freeze-modules", "encoder.net.0", "--clip-grad", "0",
        "--save-interval", "2", "--save-format", "pt", "--save-total-limit", "1", "--deterministic-mode",
        "--disable-tf32", "--manual-gc", "--manual-gc-interval", "2", "--detail-log-interval", "2",
        "--timing-log-level", "1", "--loss-log-rank", "0", "--tensorboard-dir", str(out / "tb"), timeout=240)
    assert result.returncode == 0, result.stderr
    records = metrics(out)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert all(r["loss_scale"] > 0 for r in records)  # float16 with a GradScaler
    # lambda_linear cycles of 3 updates: f_start, f_max, halfway down to f_min, then the next cycle's f_start
    assert [r["lr/head.4"] for r in records] == pytest.approx([5e-3, 1e-2, (1e-2 + 1e-5) / 2, 5e-3])
    assert "time/optimizer_s/rank0" in records[1] and "time/optimizer_s" not in records[0]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["latest", "step_4"]
    assert (out / "checkpoints/step_4/model.pt").is_file()
    assert list((out / "tb").glob("events.out.tfevents.*"))
    assert json.loads((out / "summary.json").read_text())["final_step"] == 4
    assert "frozen (encoder.net.0)" in result.stderr and "head.4 (no decay)" in result.stderr


def test_bad_trainer_flags_are_reported_together_before_training(tmp_path: Path) -> None:
    result = run_embodied(*BASE, "--output-dir", str(tmp_path / "run"), "--lr-num-cycles", "2",
                          "--optimizer", "ApexFusedAdamW", "--pretrained-checkpoint", str(tmp_path / "nope"),
                          timeout=120)
    assert result.returncode == 2, result.stderr
    assert "--lr-num-cycles 2: read only by --lr-decay-style cosine_with_restarts" in result.stderr
    assert "--optimizer ApexFusedAdamW" in result.stderr
    assert "nope: no such file or directory" in result.stderr
    assert not (tmp_path / "run").exists()
