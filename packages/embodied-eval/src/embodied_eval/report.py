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

__all__ = ["render_table", "render_task_table", "summarize", "summarize_tasks", "write_json"]


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


def _rate(results: Sequence[EpisodeResult]) -> dict[str, Any]:
    successes = sum(r.success for r in results)
    low, high = wilson_interval(successes, len(results))
    return {"episodes": len(results), "successes": successes, "success_rate": successes / len(results),
            "success_rate_ci95": [low, high]}


def summarize_tasks(results: Sequence[EpisodeResult], groups: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Success per task, per group and overall, the way lerobot-eval aggregates, plus the papers' "Avg".

    A group's rate is the mean over all of its episodes (lerobot-eval's per-group figure); ``overall`` the mean
    over every episode; ``mean_of_group_means`` the unweighted mean of the group rates, which is what MetaWorld
    papers print as "Avg" over easy/medium/hard/very hard (it weights a 5-task group like a 28-task one).
    """
    by_task: dict[str, list[EpisodeResult]] = {}
    for result in results:
        by_task.setdefault(str(result.task), []).append(result)
    per_group = {}
    for group, members in groups.items():
        episodes = [r for task in members for r in by_task.get(task, [])]
        if episodes:
            per_group[group] = {"tasks": list(members), **_rate(episodes)}
    out: dict[str, Any] = {
        "per_task": {task: _rate(episodes) for task, episodes in by_task.items()},
        "per_group": per_group,
        "overall": _rate(results),
    }
    if per_group:
        out["mean_of_group_means"] = {
            "value": float(np.mean([g["success_rate"] for g in per_group.values()])),
            "groups": list(per_group),
            "label": "Avg: the unweighted mean of the group success rates (the MetaWorld papers' figure)",
        }
    return out


def render_task_table(columns: Mapping[str, Mapping[str, Any]], *, title: str) -> str:
    """Success per task, group, overall and "Avg": one column per policy (``{name: summarize_tasks(...)}``)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column("task / group")
    for name in columns:
        table.add_column(name, justify="right")
    first = next(iter(columns.values()))
    rows: list[tuple[str, list[str]]] = []
    for task in first["per_task"]:
        rows.append((task, [_cell(c["per_task"].get(task)) for c in columns.values()]))
    for group in first["per_group"]:
        rows.append((f"group {group} ({len(first['per_group'][group]['tasks'])} tasks)",
                     [_cell(c["per_group"].get(group)) for c in columns.values()]))
    rows.append(("overall (all episodes)", [_cell(c["overall"]) for c in columns.values()]))
    if "mean_of_group_means" in first:
        rows.append(("Avg (mean of group means)",
                     [f"{c['mean_of_group_means']['value']:.1%}" for c in columns.values()]))
    for label, cells in rows:
        table.add_row(label, *cells)
    return _text(table)


def _cell(rate: Mapping[str, Any] | None) -> str:
    if rate is None:
        return "-"
    return f"{rate['success_rate']:.0%} ({rate['successes']}/{rate['episodes']})"


def _text(table: Any) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=110, color_system=None).print(table)
    return buffer.getvalue().rstrip()


def write_json(path: Path, document: Mapping[str, Any]) -> Path:
    """Writes ``document`` as indented JSON (via a temporary file, so a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    tmp.replace(path)
    return path


def render_table(rows: Sequence[Mapping[str, Any]], *, title: str) -> str:
    """A plain-text table: one row per evaluated policy (``name`` plus a :func:`summarize` record)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column, justify in (("policy", "left"), ("episodes", "right"), ("success", "right"),
                            ("95% CI", "right"), ("mean return", "right"), ("mean length", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        low, high = row["success_rate_ci95"]
        table.add_row(str(row["name"]), str(row["episodes"]), f"{row['success_rate']:.0%}",
                      f"{low:.0%}-{high:.0%}", f"{row['mean_return']:.2f}", f"{row['mean_length']:.1f}")
    return _text(table)
