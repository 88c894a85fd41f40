"""Loggers, read back with the libraries' own readers: TensorBoard's EventAccumulator, `wandb leet inspect`
(wandb's reader of offline run files), metrics.jsonl; plus timings, --loss-log-rank, progress bar, summary."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console

from embodied_core.config.training_args import TrainingArgs
from embodied_core.distributed.base import DistributedStrategy
from embodied_core.loggers.progress import ProgressBarLogger, build_progress
from embodied_core.trainer.api import Trainer
from embodied_core.trainer.metrics import StepRecord, reduce_step_metrics
from tests.core.trainer_support import metrics, training


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One short run with every logger on (W&B offline), stage timings on steps 2 and 4."""
    out = tmp_path_factory.mktemp("logged")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
            mp.setenv(var, str(out / "wandb-home"))
        mp.setenv("WANDB_SILENT", "true")
        Trainer({"training": training(out, train_iters=4, tensorboard_dir=str(out / "tb"), wandb_mode="offline",
                                      wandb_project="embodied-tests", detail_log_interval=2,
                                      timing_log_level=1)}).train()
    return out


def test_metrics_jsonl_has_the_contract_keys_and_timings_on_detail_steps(logged_run: Path) -> None:
    records = metrics(logged_run)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    for record in records:
        assert {"step", "loss", "lr", "grad_norm", "step_time_s", "samples_per_s", "skipped_iters", "nan_iters",
                "skipped_updates", "action_mse"} <= set(record)
        timed = {k for k in record if k.startswith("time/")}
        if record["step"] % 2 == 0:
            assert timed == {"time/data_s", "time/forward_backward_s", "time/optimizer_s", "time/data_s/rank0",
                             "time/forward_backward_s/rank0", "time/optimizer_s/rank0"}
            assert all(record[k] >= 0 for k in timed)
            assert record["time/forward_backward_s"] <= record["step_time_s"]
        else:
            assert not timed


def test_tensorboard_events_hold_the_logged_scalars(logged_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(logged_run / "tb"))
    events.Reload()
    assert {"train/loss", "train/lr", "train/grad_norm", "train/time/optimizer_s"} <= set(events.Tags()["scalars"])
    records = metrics(logged_run)
    scalars = events.Scalars("train/loss")
    assert [e.step for e in scalars] == [r["step"] for r in records]
    assert [e.value for e in scalars] == pytest.approx([r["loss"] for r in records], rel=1e-6)  # stored as float32
    assert [e.step for e in events.Scalars("train/time/optimizer_s")] == [2, 4]
    assert "config/text_summary" in events.Tags()["tensors"]


def _wandb_inspect(run_dir: Path, *extra: str) -> str:
    wandb_cli = [sys.executable, "-c", "import sys; from wandb.cli.cli import cli; sys.exit(cli())"]
    result = subprocess.run([*wandb_cli, "leet", "inspect", "--json", *extra, str(run_dir)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_wandb_offline_run_records_config_and_metrics(logged_run: Path) -> None:
    run_dirs = list((logged_run / "wandb").glob("offline-run-*"))
    assert len(run_dirs) == 1 and list(run_dirs[0].glob("run-*.wandb"))
    summary = json.loads(_wandb_inspect(run_dirs[0], "--summary"))
    assert summary["project"] == "embodied-tests" and summary["state"] == "finished"
    assert summary["config"]["training"]["model_name"] == "tiny_flow_policy"
    assert summary["config"]["training"]["wandb_mode"] == "offline"
    assert summary["run_id"] == (logged_run / "wandb_run_id").read_text().strip()
    assert summary["summary"]["final_step"] == 4
    history = [json.loads(line)["history"] for line in _wandb_inspect(run_dirs[0]).splitlines()
               if json.loads(line)["type"] == "history"]
    records = metrics(logged_run)
    assert [(h["step"]["num"], h["item"]["loss"]) for h in history] == [(r["step"], r["loss"]) for r in records]


def test_summary_and_loss_curve_are_written(logged_run: Path) -> None:
    summary = json.loads((logged_run / "summary.json").read_text())
    assert summary["final_step"] == 4 and summary["final_loss"] == metrics(logged_run)[-1]["loss"]
    assert summary["steps_this_run"] == 4 and summary["steps_per_s"] > 0
    png = logged_run / "loss_curve.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(png).shape[:2] == (450, 800)


class TwoRanks(DistributedStrategy):
    """Pretends to be rank 0 of 2: rank 1 reports a loss sum three times rank 0's and twice its timings."""

    def __init__(self) -> None:
        super().__init__(TrainingArgs())
        self.world_size = 2

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        return (tensor + self._other(tensor)) / 2

    def all_gather_scalars(self, tensor: torch.Tensor) -> torch.Tensor:
        return torch.stack([tensor, self._other(tensor)])

    @staticmethod
    def _other(tensor: torch.Tensor) -> torch.Tensor:
        return tensor * torch.tensor([3.0, 1.0]) if tensor.numel() == 2 else tensor * 2


def _reduce(**training_args: Any) -> dict[str, float]:
    record = StepRecord(loss_sum=1.0, good=1, grad_norm=0.5,
                        applied=True, lrs={"default": 1e-3}, step_time_s=0.5, model_metrics={},
                        timings={"data": 0.1, "forward_backward": 0.2, "optimizer": 0.05})
    return reduce_step_metrics(record, args=TrainingArgs(**training_args), strategy=TwoRanks(), counters={})


def test_loss_log_rank_and_per_rank_timings_over_two_ranks() -> None:
    out = _reduce(loss_log_rank=[-1, 1], timing_log_level=1)
    assert out["loss"] == pytest.approx(2.0)  # global mean: (1 + 3) / 2 good micro-batches
    assert out["loss/rank1"] == pytest.approx(3.0)
    assert out["time/forward_backward_s"] == pytest.approx(0.4)  # level 0: the slowest rank
    assert (out["time/data_s/rank0"], out["time/data_s/rank1"]) == pytest.approx((0.1, 0.2))
    only_rank0 = _reduce(loss_log_rank=[0], timing_log_level=0)
    assert only_rank0["loss"] == pytest.approx(1.0) and "loss/rank0" in only_rank0
    assert not any(k.endswith("/rank0") for k in only_rank0 if k.startswith("time/"))
    assert only_rank0["samples_per_s"] == pytest.approx(4 * 2 / 0.5)  # global batch over both ranks


def test_progress_bar_shows_steps_eta_and_loss() -> None:
    buffer = io.StringIO()
    bar = ProgressBarLogger(10, start_step=2, console=Console(file=buffer, force_terminal=True, width=120))
    bar.log_metrics(5, {"loss": 0.5123})
    bar.close()
    text = buffer.getvalue()
    assert "5/10" in text and "loss 0.5123" in text and "0:00:0" in text  # elapsed and remaining time
    assert build_progress(TrainingArgs(), output_dir=Path("."), is_main=True) is None  # stderr is not a TTY here
