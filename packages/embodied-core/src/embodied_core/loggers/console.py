"""Console logger: one line per ``--log-interval`` on rank 0."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodied_core.config.training_args import TrainingArgs
from embodied_core.loggers.base import MetricsLogger

__all__ = ["ConsoleLogger", "build_console"]

logger = logging.getLogger("embodied.train")

_ORDER = ("loss", "lr", "grad_norm", "step_time_s", "samples_per_s", "skipped_iters", "nan_iters", "skipped_updates")


def _format(key: str, value: float) -> str:
    if key in ("lr",):
        return f"{key} {value:.3e}"
    if key in ("skipped_iters", "nan_iters", "skipped_updates"):
        return f"{key} {int(value)}"
    return f"{key} {value:.4g}"


class ConsoleLogger(MetricsLogger):
    """``step 10/200 | loss 0.52 | lr 1.0e-04 | grad_norm 1.3 | step_time_s 0.031 | samples/s 512 | ...``"""

    def __init__(self, total_steps: int) -> None:
        self.total_steps = total_steps

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        ordered = [k for k in _ORDER if k in metrics] + sorted(k for k in metrics if k not in _ORDER)
        fields = " | ".join(_format(k, metrics[k]) for k in ordered)
        logger.info("step %d/%d | %s", step, self.total_steps, fields)

    def log_summary(self, summary: Mapping[str, Any]) -> None:
        logger.info("summary: %s", ", ".join(f"{k}={v}" for k, v in summary.items()))


def build_console(args: TrainingArgs, *, output_dir: Path, is_main: bool, **_: Any) -> MetricsLogger | None:
    """Factory of the ``console`` logger (rank 0 only)."""
    return ConsoleLogger(args.train_iters) if is_main else None
