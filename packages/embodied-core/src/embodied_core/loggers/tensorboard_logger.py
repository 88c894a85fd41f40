"""TensorBoard logger (``--tensorboard-dir``): scalars under ``train/``, the resolved config as text."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from embodied_core.config.training_args import TrainingArgs
from embodied_core.loggers.base import MetricsLogger

__all__ = ["TensorBoardLogger", "build_tensorboard"]


class TensorBoardLogger(MetricsLogger):
    """Writes event files with ``torch.utils.tensorboard.SummaryWriter``.

    Args:
        log_dir: the event directory.
        purge_step: on resume, the first step this run will log; TensorBoard hides events at or after it
            that an interrupted earlier run left behind.
        max_queue: events queued before they are written (``--tensorboard-queue-size``).
    """

    def __init__(self, log_dir: str | Path, *, purge_step: int | None = None, max_queue: int = 1000) -> None:
        from torch.utils.tensorboard import SummaryWriter  # imported here: tensorboard is optional

        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step, max_queue=max_queue)

    def log_config(self, config: Mapping[str, Any]) -> None:
        text = yaml.safe_dump(dict(config), sort_keys=False)
        # Markdown code block so TensorBoard's text tab keeps the indentation.
        self.writer.add_text("config", "```\n" + text + "\n```", global_step=0)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.writer.add_scalar(f"train/{key}", value, global_step=step)

    def log_summary(self, summary: Mapping[str, Any]) -> None:
        self.writer.add_text("summary", "```\n" + yaml.safe_dump(dict(summary), sort_keys=False) + "\n```")

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


def build_tensorboard(args: TrainingArgs, *, output_dir: Path, is_main: bool, resume_step: int | None = None,
                      **_: Any) -> MetricsLogger | None:
    """Factory of the ``tensorboard`` logger (rank 0, when ``--tensorboard-dir`` is set)."""
    if not is_main or not args.tensorboard_dir:
        return None
    return TensorBoardLogger(args.tensorboard_dir, purge_step=resume_step + 1 if resume_step is not None else None,
                             max_queue=args.tensorboard_queue_size)
