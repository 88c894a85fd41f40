"""Helpers shared by the trainer tests: a tiny, fast run configuration and readers of its outputs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

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


def metrics(out: Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``."""
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]


def losses(out: Path) -> list[tuple[int, float]]:
    """``(step, loss)`` per logged step."""
    return [(r["step"], r["loss"]) for r in metrics(out)]


def is_nan(value: Any) -> bool:
    """True for NaN floats and for null (how metrics.jsonl writes NaN)."""
    return value is None or (isinstance(value, float) and math.isnan(value))
