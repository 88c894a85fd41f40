"""Freezing, per-module LR groups and gradient clipping through the real training loop."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from embodied_core import hookimpl
from embodied_core.errors import ConfigError
from embodied_core.trainer.base import BaseTrainer
from embodied_core.trainer.freeze import freeze_modules
from tests.core.trainer_support import build, build_with_final, metrics


class ModeProbe:
    """Records the train/eval mode of two modules during every forward."""

    def __init__(self) -> None:
        self.trainer: BaseTrainer | None = None
        self.modes: list[tuple[bool, bool, bool]] = []

    def watch(self, trainer: BaseTrainer) -> None:
        self.trainer = trainer
        original = trainer.forward_backward

        def forward_backward(batch: Any, *, scale: float) -> Any:
            model = trainer.strategy.unwrap_model(trainer.model)
            self.modes.append((model.training, model.encoder.training, model.head.training))
            return original(batch, scale=scale)

        trainer.forward_backward = forward_backward  # type: ignore[method-assign]


def test_frozen_modules_do_not_change_and_stay_in_eval_mode(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="embodied")
    probe = ModeProbe()
    trainer, final = build_with_final(tmp_path, freeze_modules="encoder, obs_norm", train_iters=3)
    probe.watch(trainer)
    initial: dict[str, torch.Tensor] = {}

    class Capture:
        @hookimpl
        def on_train_start(self, config: Any, model: nn.Module, output_dir: str, start_step: int) -> None:
            initial.update({k: v.detach().clone() for k, v in model.state_dict().items()})

    trainer.hooks.register(Capture())
    trainer.train()
    assert probe.modes == [(True, False, True)] * 3  # model.train() each step leaves the frozen encoder in eval
    frozen = [k for k in initial if k.startswith(("encoder.", "obs_norm."))]
    assert frozen and all(torch.equal(initial[k], final.state[k]) for k in frozen)
    assert any(not torch.equal(initial[k], final.state[k]) for k in initial if k.startswith("head."))
    model = final.model
    assert not any(id(p) in final.in_optimizer for p in [*model.encoder.parameters(), *model.obs_norm.parameters()])
    assert "trainable" in caplog.text and "frozen (encoder, obs_norm)" in caplog.text


def test_freeze_unmatched_path_is_an_error_naming_it() -> None:
    model = nn.Sequential(nn.Linear(2, 2))
    model.add_module("encoder", nn.Linear(2, 2))
    with pytest.raises(ConfigError, match=r"--freeze-modules 'encodr': no module has this path.*did you mean "
                                          r"'encoder'"):
        freeze_modules(model, ["encoder", "encodr"])


def test_freeze_report_counts() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    report = freeze_modules(model, ["0"])
    assert (report.trainable, report.frozen) == (4, 9)
    assert not model[0].training
    model.train()
    assert model.training and not model[0].training and model[1].training


def test_lr_groups_drive_the_optimizer_and_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="embodied")
    trainer, final = build_with_final(tmp_path, lr_group="head.4=1e-2,head=1e-4", weight_decay_grouping="bias_norm",
                                      lr_decay_style="constant", train_iters=2)
    trainer.train()
    peaks = {g["name"]: (g["lr"], g["weight_decay"]) for g in final.param_groups}
    assert peaks["head.4"] == (1e-2, 0.01) and peaks["head.4 (no decay)"] == (1e-2, 0.0)
    assert peaks["head"][0] == 1e-4 and peaks["default"][0] == 1e-3
    record = metrics(tmp_path)[-1]
    assert (record["lr/head.4"], record["lr/head"], record["lr/default"], record["lr"]) == (1e-2, 1e-4, 1e-3, 1e-3)
    assert "head.4 (no decay)" in caplog.text  # the table of LR per group


def test_lr_group_unmatched_path_fails_before_training(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--lr-group 'decoder'"):
        build(tmp_path, lr_group="decoder=1e-3").train()


@pytest.mark.parametrize("clip", [0.0, -1.0, 1e-3])
def test_clip_grad_clips_or_only_measures(tmp_path: Path, clip: float) -> None:
    # SGD's first step moves parameters by lr * gradient, so the step size shows the (clipped) norm.
    lr = 1e-2
    trainer, final = build_with_final(tmp_path, optimizer="SGD", weight_decay=0.0, lr_base=lr,
                                      lr_decay_style="constant", lr_warmup_iters=0, clip_grad=clip, train_iters=1)
    before: dict[str, torch.Tensor] = {}

    class Capture:
        @hookimpl
        def on_train_start(self, config: Any, model: nn.Module, output_dir: str, start_step: int) -> None:
            before.update({k: v.detach().clone() for k, v in model.named_parameters()})

    trainer.hooks.register(Capture())
    trainer.train()
    after = final.params
    moved = torch.sqrt(sum(((after[k] - before[k]) ** 2).sum() for k in before)).item() / lr
    grad_norm = metrics(tmp_path)[0]["grad_norm"]
    assert grad_norm > 1e-2  # the norm is measured in every case
    assert moved == pytest.approx(grad_norm if clip <= 0 else clip, rel=1e-3)
