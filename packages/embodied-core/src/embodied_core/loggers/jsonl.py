"""``metrics.jsonl``: one JSON object per logged step (rank 0)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embodied_core.config.training_args import TrainingArgs
from embodied_core.loggers.base import MetricsLogger
from embodied_core.storage import guard_write

__all__ = ["JsonlLogger", "build_jsonl"]


class JsonlLogger(MetricsLogger):
    """Appends ``{"step": N, ...metrics}`` lines to ``<output_dir>/metrics.jsonl`` (line-buffered)."""

    def __init__(self, path: Path, *, truncate_after_step: int | None = None) -> None:
        self.path = path
        if truncate_after_step is not None and path.exists():
            # A resumed run drops lines logged after its checkpoint, so the file reads as one clean run.
            kept = [line for line in path.read_text().splitlines()
                    if line.strip() and json.loads(line).get("step", 0) <= truncate_after_step]
            path.write_text("".join(line + "\n" for line in kept))
        elif truncate_after_step is None and path.exists():
            path.unlink()
        self._file = path.open("a", buffering=1)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        # JSON has no NaN/Infinity: a skipped step's loss is written as null so every line stays valid JSON.
        record = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        with guard_write(self.path, what=f"the metrics of step {step}"):  # a full or read-only output dir
            self._file.write(json.dumps({"step": step, **record}, allow_nan=False) + "\n")

    def close(self) -> None:
        self._file.close()


def build_jsonl(args: TrainingArgs, *, output_dir: Path, is_main: bool, resume_step: int | None = None,
                **_: Any) -> MetricsLogger | None:
    """Factory of the ``jsonl`` logger (always on, rank 0 only)."""
    if not is_main:
        return None
    return JsonlLogger(output_dir / "metrics.jsonl", truncate_after_step=resume_step)
