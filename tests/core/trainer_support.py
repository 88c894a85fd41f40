"""Helpers shared by the trainer tests: a tiny, fast run configuration and readers of its outputs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from embodied_core import hookimpl
from embodied_core.trainer.api import Trainer
from embodied_core.trainer.base import BaseTrainer


def training(out: Path, **extra: Any) -> dict[str, Any]:
    """tiny_flow_policy on dummy data, float32, no workers, a short schedule; ``extra`` overrides."""
    base = {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", "dtype": "float32",
            "num_workers": 0, "per_device_batch_size": 4, "num_samples": 24, "output_dir": str(out),
            "lr_base": 1e-3, "lr_warmup_iters": 2, "lr_decay_iters": 8, "log_interval": 1, "seed": 5,
            "save_interval": 0, "train_iters": 4}
    return {**base, **extra}


def build(out: Path, *, plugins: tuple[Any, ...] = (), model: dict[str, Any] | None = None,
          **extra: Any) -> BaseTrainer:
    """A trainer instance (not set up) for :func:`training`."""
    return Trainer({"training": training(out, **extra), "model": model or {}}, plugins=plugins).build()


class FinalState:
    """Hook that keeps the trained model's parameters/state and the optimizer's groups at the end of training
    (the trainer releases both when it closes)."""

    def __init__(self) -> None:
        self.trainer: BaseTrainer | None = None
        self.state: dict[str, Any] = {}
        self.params: dict[str, Any] = {}
        self.param_groups: list[dict[str, Any]] = []
        self.in_optimizer: set[int] = set()
        self.model: Any = None

    @hookimpl
    def on_train_end(self, step: int, output_dir: str, summary: dict[str, Any]) -> None:
        assert self.trainer is not None
        self.model = self.trainer.strategy.unwrap_model(self.trainer.model)
        self.state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.params = {k: v.detach().clone() for k, v in self.model.named_parameters()}
        self.param_groups = [{k: v for k, v in g.items() if k != "params"} for g in self.trainer.optimizer.param_groups]
        self.in_optimizer = {id(p) for g in self.trainer.optimizer.param_groups for p in g["params"]}


def build_with_final(out: Path, **extra: Any) -> tuple[BaseTrainer, FinalState]:
    """:func:`build` plus a :class:`FinalState` hook bound to the trainer."""
    final = FinalState()
    trainer = build(out, plugins=(final,), **extra)
    final.trainer = trainer
    return trainer, final


def metrics(out: Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``."""
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]


def losses(out: Path) -> list[tuple[int, float]]:
    """``(step, loss)`` per logged step."""
    return [(r["step"], r["loss"]) for r in metrics(out)]


def is_nan(value: Any) -> bool:
    """True for NaN floats and for null (how metrics.jsonl writes NaN)."""
    return value is None or (isinstance(value, float) and math.isnan(value))
