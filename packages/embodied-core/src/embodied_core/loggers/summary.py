"""End-of-run artifacts in the output dir: ``summary.json`` and ``loss_curve.png``."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["read_metrics", "write_loss_curve", "write_summary"]

logger = logging.getLogger("embodied.train")

METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
LOSS_CURVE_FILE = "loss_curve.png"


def read_metrics(output_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``<output_dir>/metrics.jsonl`` (empty when the file does not exist)."""
    path = Path(output_dir) / METRICS_FILE
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_summary(output_dir: str | Path, summary: Mapping[str, Any]) -> Path:
    """Writes ``summary.json`` (NaN written as null) and returns its path."""
    path = Path(output_dir) / SUMMARY_FILE
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in summary.items()}
    path.write_text(json.dumps(clean, indent=2) + "\n")
    return path


def write_loss_curve(output_dir: str | Path) -> Path | None:
    """Plots loss (and LR on a second axis) over steps from ``metrics.jsonl`` into ``loss_curve.png``.

    Covers resumed runs too, since the file holds every logged step. Returns None (with a warning) when
    matplotlib is not installed or nothing was logged.
    """
    records = [r for r in read_metrics(output_dir) if isinstance(r.get("loss"), (int, float))]
    if not records:
        return None
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        logger.warning("matplotlib is not installed: no %s (pip install matplotlib, or embodied-core[plots])",
                       LOSS_CURVE_FILE)
        return None
    steps = [r["step"] for r in records]
    # The object API with the Agg canvas: no pyplot (no global figure registry, never a window or a display)
    # and fixed margins instead of tight_layout, which measures every tick label (half the cost of the plot).
    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.09, 0.12, 0.76, 0.78))
    ax.plot(steps, [r["loss"] for r in records], color="tab:blue", linewidth=1.2, label="loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss", color="tab:blue")
    ax.grid(alpha=0.3)
    if all("lr" in r for r in records):
        lr_ax = ax.twinx()
        lr_ax.plot(steps, [r["lr"] for r in records], color="tab:orange", linewidth=1.0, alpha=0.8)
        lr_ax.set_ylabel("lr", color="tab:orange")
    ax.set_title(f"{Path(output_dir).name}: loss over {len(records)} logged steps")
    path = Path(output_dir) / LOSS_CURVE_FILE
    fig.savefig(path)
    return path
