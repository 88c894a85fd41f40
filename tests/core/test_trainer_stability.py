"""Stability guards: NaN/Inf and spiking losses, skipped updates, float16 loss scaling, runtime flags."""

from __future__ import annotations

import copy
import gc
from pathlib import Path
from typing import Any

import pytest
import torch

from embodied_core import hookimpl
from embodied_core.config.training_args import TrainingArgs
from embodied_core.trainer import runtime as runtime_module
from embodied_core.trainer.base import BaseTrainer
from embodied_core.trainer.runtime import RuntimeSettings
from tests.core.trainer_support import build, is_nan, metrics


class Snapshots:
    """Copies of the parameters and optimizer state after every step."""

    def __init__(self) -> None:
        self.trainer: BaseTrainer | None = None
        self.params: dict[int, dict[str, torch.Tensor]] = {}
        self.optim: dict[int, dict[str, Any]] = {}

    @hookimpl
    def on_step_end(self, step: int, metrics: dict[str, float] | None) -> None:
        assert self.trainer is not None
        model = self.trainer.strategy.unwrap_model(self.trainer.model)
        self.params[step] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.optim[step] = copy.deepcopy(self.trainer.optimizer.state_dict()["state"])


def _inject(trainer: BaseTrainer, *, at_step: int, micro: int = 0, factor: float,
            key: str = "observation.state") -> None:
    """Multiplies input ``key`` of one micro-batch of one step by ``factor`` (NaN or a huge number)."""
    original = trainer.forward_backward
    seen = {"micro": 0, "step": -1}

    def forward_backward(batch: Any, *, scale: float) -> Any:
        if seen["step"] != trainer.state.step:
            seen.update(step=trainer.state.step, micro=0)
        if trainer.state.step + 1 == at_step and seen["micro"] == micro:
            batch[key] = batch[key] * factor
        seen["micro"] += 1
        return original(batch, scale=scale)

    trainer.forward_backward = forward_backward  # type: ignore[method-assign]


def _equal_state(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    return a.keys() == b.keys() and all(
        all(torch.equal(a[k][n], b[k][n]) if isinstance(a[k][n], torch.Tensor) else a[k][n] == b[k][n]
            for n in a[k]) for k in a)


def _run_with_nan(tmp_path: Path, **extra: Any) -> tuple[Snapshots, list[dict[str, Any]]]:
    snaps = Snapshots()
    trainer = build(tmp_path, plugins=(snaps,), train_iters=5, **extra)
    snaps.trainer = trainer
    _inject(trainer, at_step=3, factor=float("nan"))
    trainer.train()
    return snaps, metrics(tmp_path)


def test_nan_mid_run_skips_the_update_and_leaves_optimizer_state_untouched(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    snaps, records = _run_with_nan(tmp_path)
    assert _equal_state(snaps.optim[3], snaps.optim[2])  # Adam moments and step counters unchanged
    assert all(torch.equal(snaps.params[3][k], snaps.params[2][k]) for k in snaps.params[2])
    assert not _equal_state(snaps.optim[4], snaps.optim[3])  # training goes on afterwards
    assert all(torch.isfinite(v).all() for v in snaps.params[5].values())
    by_step = {r["step"]: r for r in records}
    assert is_nan(by_step[3]["loss"])
    assert (by_step[2]["nan_iters"], by_step[2]["skipped_iters"], by_step[2]["skipped_updates"]) == (0, 0, 0)
    assert (by_step[3]["nan_iters"], by_step[3]["skipped_iters"], by_step[3]["skipped_updates"]) == (1, 1, 1)
    assert by_step[5]["skipped_updates"] == 1 and not is_nan(by_step[5]["loss"])
    assert "step 3: update skipped (optimizer state untouched)" in caplog.text


@pytest.mark.parametrize("check", [True, False])
def test_nan_gradients_next_to_good_micro_batches_follow_the_nan_check_flag(tmp_path: Path, check: bool,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    # With accumulation the good micro-batch keeps the update alive; the NaN one still poisons the gradients
    # (0 * NaN activations), which only --check-for-nan-in-loss-and-grad catches.
    snaps, records = _run_with_nan(tmp_path, gradient_accumulation_steps=2, check_for_nan_in_loss_and_grad=check)
    assert (records[2]["nan_iters"], records[2]["skipped_iters"]) == (1, 1)
    finite = all(torch.isfinite(v).all() for v in snaps.params[3].values())
    if check:
        assert finite and _equal_state(snaps.optim[3], snaps.optim[2]) and records[2]["skipped_updates"] == 1
        assert "update skipped (optimizer state untouched): non-finite gradient norm after 1 NaN/Inf" in caplog.text
    else:
        assert not finite and records[2]["skipped_updates"] == 0


def test_spike_in_one_micro_batch_contributes_zero_and_the_update_still_happens(tmp_path: Path) -> None:
    snaps = Snapshots()
    trainer = build(tmp_path, plugins=(snaps,), train_iters=3, gradient_accumulation_steps=2,
                    loss_spike_threshold=50.0)
    snaps.trainer = trainer
    _inject(trainer, at_step=2, micro=1, factor=1e3, key="action")  # finite, far above the threshold
    trainer.train()
    by_step = {r["step"]: r for r in metrics(tmp_path)}
    assert (by_step[2]["skipped_iters"], by_step[2]["nan_iters"], by_step[2]["skipped_updates"]) == (1, 0, 0)
    assert by_step[2]["loss"] < 50.0  # the mean over the micro-batch that counted
    assert not _equal_state(snaps.optim[2], snaps.optim[1])


def test_spike_without_accumulation_skips_the_update(tmp_path: Path) -> None:
    """One micro-batch per update: the spike is caught after the step's sync and the whole update is skipped."""
    snaps = Snapshots()
    trainer = build(tmp_path, plugins=(snaps,), train_iters=3, loss_spike_threshold=50.0)
    snaps.trainer = trainer
    _inject(trainer, at_step=2, factor=1e3, key="action")
    trainer.train()
    by_step = {r["step"]: r for r in metrics(tmp_path)}
    assert (by_step[2]["skipped_iters"], by_step[2]["nan_iters"], by_step[2]["skipped_updates"]) == (1, 0, 1)
    assert _equal_state(snaps.optim[2], snaps.optim[1])
    assert all(torch.equal(snaps.params[2][k], snaps.params[1][k]) for k in snaps.params[1])
    assert not _equal_state(snaps.optim[3], snaps.optim[2])


def test_spike_threshold_reads_the_raw_loss_not_the_accumulation_scaled_one(tmp_path: Path) -> None:
    # tiny_flow_policy's first losses are about 2: with GA=4 the scaled loss would be ~0.5 and pass a 1.0 bar.
    snaps = Snapshots()
    trainer = build(tmp_path, plugins=(snaps,), train_iters=1, gradient_accumulation_steps=4,
                    loss_spike_threshold=1.0)
    snaps.trainer = trainer
    trainer.train()
    record = metrics(tmp_path)[0]
    assert (record["skipped_iters"], record["skipped_updates"]) == (4, 1)
    assert snaps.optim[1] == {}  # the optimizer never stepped


def test_float16_trains_with_a_grad_scaler_and_resumes_its_scale(tmp_path: Path) -> None:
    trainer = build(tmp_path, dtype="float16", train_iters=3, save_interval=3)
    trainer.train()
    assert isinstance(trainer.scaler, torch.amp.GradScaler)
    records = metrics(tmp_path)
    assert all(not is_nan(r["loss"]) and r["loss_scale"] > 0 for r in records)
    state = torch.load(tmp_path / "checkpoints/step_3/training_state/rank0.pt", weights_only=True)
    assert state["grad_scaler"]["scale"] == records[-1]["loss_scale"]


def test_runtime_flags_apply_during_training_and_are_restored(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    class Probe:
        @hookimpl
        def on_train_start(self, config: Any, model: Any, output_dir: str, start_step: int) -> None:
            seen.update(deterministic=torch.are_deterministic_algorithms_enabled(),
                        tf32=torch.backends.cuda.matmul.allow_tf32, cudnn_tf32=torch.backends.cudnn.allow_tf32,
                        gc=gc.isenabled())

    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cuda.matmul.allow_tf32, gc.isenabled())
    build(tmp_path, plugins=(Probe(),), deterministic_mode=True, disable_tf32=True, manual_gc=True,
          manual_gc_interval=2).train()
    assert seen == {"deterministic": True, "tf32": False, "cudnn_tf32": False, "gc": False}
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cuda.matmul.allow_tf32,
            gc.isenabled()) == before


def test_tf32_is_on_by_default(tmp_path: Path) -> None:
    settings = RuntimeSettings(TrainingArgs())
    settings.apply()
    try:
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        settings.restore()


def test_manual_gc_collects_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(runtime_module.gc, "collect", lambda *a: calls.append(1) or 0)
    settings = RuntimeSettings(TrainingArgs(manual_gc=True, manual_gc_interval=3))
    settings.apply()
    try:
        for step in range(1, 10):
            settings.on_step_end(step)
    finally:
        settings.restore()
    assert len(calls) == 1 + 3 + 1  # at start, at steps 3, 6, 9, and at the end
