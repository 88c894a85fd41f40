"""A rich progress bar with ETA on rank 0 (when stderr is a terminal).

Log lines keep printing above the bar: while it is shown, the logging handlers that wrote to the
terminal write through rich's redirected stderr instead.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from embodied_core.config.training_args import TrainingArgs
from embodied_core.loggers.base import MetricsLogger

__all__ = ["ProgressBarLogger", "build_progress"]


class ProgressBarLogger(MetricsLogger):
    """``train ━━━━━━━━━━━━━━━━━ 120/1000 0:00:31 < 0:03:48 loss 0.512``

    Args:
        total_steps: ``--train-iters``.
        start_step: the step training starts from (after a resume), so the ETA uses this run's rate.
        console: where to draw (stderr by default).
    """

    def __init__(self, total_steps: int, *, start_step: int = 0, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress = Progress(
            TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("<"),
            TimeRemainingColumn(), TextColumn("{task.fields[loss]}"), console=self.console, refresh_per_second=4,
        )
        self.task = self.progress.add_task("train", total=total_steps, completed=start_step, loss="")
        self._swapped: list[tuple[logging.StreamHandler, Any]] = []
        self.progress.start()
        self._redirect_log_handlers()

    def _redirect_log_handlers(self) -> None:
        # rich swaps sys.stderr for a proxy that prints above the bar; handlers created earlier still hold
        # the real stream, so point them at the proxy while the bar is shown.
        real = {sys.__stderr__, getattr(self.console, "file", None)}
        for handler in logging.getLogger().handlers + logging.getLogger("embodied").handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream in real and sys.stderr not in real:
                self._swapped.append((handler, handler.setStream(sys.stderr)))

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        loss = metrics.get("loss")
        text = f"loss {loss:.4g}" if isinstance(loss, float) and math.isfinite(loss) else ""
        self.progress.update(self.task, completed=step, loss=text)

    def close(self) -> None:
        for handler, stream in self._swapped:
            handler.setStream(stream)
        self._swapped.clear()
        self.progress.stop()


def build_progress(args: TrainingArgs, *, output_dir: Path, is_main: bool, resume_step: int | None = None,
                   **_: Any) -> MetricsLogger | None:
    """Factory of the ``progress`` bar: rank 0, and only when stderr is an interactive terminal."""
    console = Console(stderr=True)
    if not is_main or not console.is_terminal or console.is_dumb_terminal:
        return None
    return ProgressBarLogger(args.train_iters, start_step=resume_step or 0, console=console)
