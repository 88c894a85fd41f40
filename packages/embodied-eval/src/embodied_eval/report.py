"""``eval.json`` and the console summary of a closed-loop evaluation."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodied_eval.intervals import wilson_interval
from embodied_eval.rollout import EpisodeResult

__all__ = ["render_table", "summarize", "write_json"]


def summarize(results: Sequence[EpisodeResult]) -> dict[str, Any]:
    """Success rate with its 95% Wilson interval, mean return and episode lengths."""
    successes = sum(r.success for r in results)
    low, high = wilson_interval(successes, len(results))
    lengths = [r.length for r in results]
    return {
        "episodes": len(results),
        "successes": successes,
        "success_rate": successes / len(results),
        "success_rate_ci95": [low, high],
        "ci_method": "wilson",
        "mean_return": float(np.mean([r.episode_return for r in results])),
        "mean_length": float(np.mean(lengths)),
        "episode_lengths": lengths,
        "predictions": int(sum(r.predictions for r in results)),
    }


def write_json(path: Path, document: Mapping[str, Any]) -> Path:
    """Writes ``document`` as indented JSON (via a temporary file, so a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    tmp.replace(path)
    return path


def render_table(rows: Sequence[Mapping[str, Any]], *, title: str) -> str:
    """A plain-text table: one row per evaluated policy (``name`` plus a :func:`summarize` record)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column, justify in (("policy", "left"), ("episodes", "right"), ("success", "right"),
                            ("95% CI", "right"), ("mean return", "right"), ("mean length", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        low, high = row["success_rate_ci95"]
        table.add_row(str(row["name"]), str(row["episodes"]), f"{row['success_rate']:.0%}",
                      f"{low:.0%}-{high:.0%}", f"{row['mean_return']:.2f}", f"{row['mean_length']:.1f}")
    buffer = io.StringIO()
    Console(file=buffer, width=110, color_system=None).print(table)
    return buffer.getvalue().rstrip()
