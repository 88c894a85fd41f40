"""Weights & Biases logger (``--wandb-mode online|offline``, project ``--wandb-project``).

wandb is imported only when this logger is built. The run lives under ``<output-dir>/wandb``; its id is
kept in ``<output-dir>/wandb_run_id`` so ``--resume`` continues the same W&B run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodied_core.config.training_args import TrainingArgs
from embodied_core.loggers.base import MetricsLogger

__all__ = ["WandbLogger", "build_wandb"]

RUN_ID_FILE = "wandb_run_id"


class WandbLogger(MetricsLogger):
    """Logs the resolved config at start, metrics per logging step and the summary at the end.

    Args:
        project: W&B project.
        mode: ``online`` or ``offline``.
        output_dir: the run's output dir (W&B files go to its ``wandb/`` folder).
        resume: continue the W&B run recorded in the output dir, if any.
    """

    def __init__(self, *, project: str, mode: str, output_dir: Path, resume: bool) -> None:
        import wandb  # imported here: wandb is optional and slow to import

        self._wandb = wandb
        self.output_dir = output_dir
        id_file = output_dir / RUN_ID_FILE
        run_id = id_file.read_text().strip() if resume and id_file.is_file() else None
        self.run = wandb.init(project=project, mode=mode, dir=str(output_dir), id=run_id,
                              resume="allow" if run_id else None, name=output_dir.name)
        id_file.write_text(self.run.id + "\n")

    def log_config(self, config: Mapping[str, Any]) -> None:
        self.run.config.update(dict(config), allow_val_change=True)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        clean = {k: v for k, v in metrics.items() if not (isinstance(v, float) and math.isnan(v))}
        self.run.log(clean, step=step)

    def log_summary(self, summary: Mapping[str, Any]) -> None:
        for key, value in summary.items():
            if value is not None:
                self.run.summary[key] = value

    def close(self) -> None:
        self.run.finish()


def build_wandb(args: TrainingArgs, *, output_dir: Path, is_main: bool, resume_step: int | None = None,
                **_: Any) -> MetricsLogger | None:
    """Factory of the ``wandb`` logger (rank 0, unless ``--wandb-mode disabled``)."""
    if not is_main or args.wandb_mode == "disabled":
        return None
    return WandbLogger(project=args.wandb_project, mode=args.wandb_mode, output_dir=output_dir,
                       resume=resume_step is not None)
