"""``embodied eval``'s closed-loop evaluation from Python: a checkpoint (or a server) in an env plugin.

```python
from embodied_eval import evaluate, RolloutSettings
report = evaluate("outputs/main_job", env="synth_reach", settings=RolloutSettings(num_episodes=50),
                  output_dir="outputs/eval", baselines=("hold", "mean_action"))
print(report.summary["success_rate"])
```
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_core import registry
from embodied_core.errors import UsageError
from embodied_core.registry.groups import ENVS
from embodied_eval.baselines import BASELINES, make_baseline
from embodied_eval.env_options import resolve_env
from embodied_eval.envs.base import EvalEnv
from embodied_eval.report import render_table, render_task_table, summarize, summarize_tasks, write_json
from embodied_eval.rollout import EpisodeResult, RolloutSettings, run_episodes
from embodied_eval.video import GRID_EPISODES, write_episode_video, write_grid_video

__all__ = ["EvalReport", "check_env", "evaluate"]


@attrs.frozen
class EvalReport:
    """What :func:`evaluate` wrote: the policy's ``eval.json`` document, one per baseline, and the table."""

    document: dict[str, Any]
    baselines: dict[str, dict[str, Any]]
    table: str
    path: Path

    @property
    def summary(self) -> dict[str, Any]:
        """The policy's success rate, interval, mean return and lengths."""
        return self.document["summary"]


def check_env(name: str) -> Callable[..., EvalEnv]:
    """The factory of env plugin ``name``; a UsageError naming the install command when its simulator is missing."""
    spec = registry.get_spec(ENVS, name, flag="--env")
    missing = spec.missing_requirements()
    if missing:
        raise UsageError(f"--env {name} needs {', '.join(missing)}, which is not installed: {spec.install_hint}")
    return registry.load_factory(ENVS, name, flag="--env")


def _check_settings(settings: RolloutSettings, baselines: Sequence[str]) -> None:
    problems = []
    for field, value, low in (("--episodes", settings.num_episodes, 1), ("--num-envs", settings.num_envs, 1),
                              ("--max-steps", settings.max_steps, 1), ("--replan-steps", settings.replan_steps, 1)):
        if value is not None and value < low:
            problems.append(f"{field} must be >= {low} (got {value})")
    if settings.ensemble_decay is not None and settings.ensemble_decay < 0:
        problems.append(f"--temporal-ensemble must be >= 0 (got {settings.ensemble_decay})")
    unknown = [b for b in baselines if b not in BASELINES]
    if unknown:
        problems.append(f"--baselines {', '.join(unknown)}: valid baselines are {', '.join(BASELINES)}")
    if problems:
        raise UsageError("; ".join(problems))


class _PolicyPool:
    """Hands the probe policy (loaded to read the metadata) to the first worker, fresh ones to the others."""

    def __init__(self, first: Any, make: Callable[[], Any]) -> None:
        self._spare = [first]
        self._make = make
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            if self._spare:
                return self._spare.pop()
        return self._make()


def _progress(total: int, description: str) -> tuple[Any, Callable[[EpisodeResult], None]]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("success {task.fields[successes]}"), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=False)
    task = progress.add_task(description, total=total, successes=0)
    lock = threading.Lock()
    count = {"successes": 0}

    def advance(result: EpisodeResult) -> None:
        with lock:
            count["successes"] += int(result.success)
            progress.update(task, advance=1, successes=count["successes"])

    return progress, advance


def _video_writer(video_dir: Path, fps: float) -> tuple[Callable[[EpisodeResult, list[np.ndarray]], str],
                                                         dict[int, list[np.ndarray]]]:
    kept: dict[int, list[np.ndarray]] = {}
    lock = threading.Lock()

    def store(result: EpisodeResult, frames: list[np.ndarray]) -> str:
        path = write_episode_video(video_dir / f"episode_{result.index:03d}.mp4", frames, fps=fps)
        if result.index < GRID_EPISODES:
            with lock:
                kept[result.index] = frames
        return str(path)

    return store, kept


def _run(name: str, make_policy: Callable[[], Any], make_env: Callable[[], EvalEnv], settings: RolloutSettings,
         *, output_dir: Path, fps: float, show_progress: bool, tasks: tuple[str, ...]
         ) -> tuple[list[EpisodeResult], float]:
    on_frames, kept = (None, {})
    if settings.video_dir is not None:
        on_frames, kept = _video_writer(output_dir / "videos", fps)
    started = time.perf_counter()
    if show_progress:
        progress, advance = _progress(settings.num_episodes * max(1, len(tasks)), name)
        with progress:
            results = run_episodes(make_policy, make_env, settings, on_episode=advance, on_frames=on_frames,
                                   tasks=tasks)
    else:
        results = run_episodes(make_policy, make_env, settings, on_frames=on_frames, tasks=tasks)
    if kept:
        write_grid_video(output_dir / "videos" / "grid.mp4", [kept[i] for i in sorted(kept)], fps=fps)
    return results, time.perf_counter() - started


def evaluate(checkpoint: str | Path | None = None, *, env: str, settings: RolloutSettings | None = None,
             output_dir: str | Path = "outputs/eval", server: str | None = None, api_key: str | None = None,
             device: str = "cpu", policy_seed: int = 0, baselines: Sequence[str] = (),
             env_options: Mapping[str, Any] | None = None, env_flags: Mapping[str, str] | None = None,
             show_progress: bool = True, allow_external_references: bool = False) -> EvalReport:
    """Closed-loop evaluation of ``checkpoint`` (or of the policy ``server`` serves) in env plugin ``env``.

    Writes ``<output_dir>/eval.json`` (and ``baselines/<name>/eval.json`` per baseline, measured on the same
    episode seeds), videos under ``videos/`` when ``settings.video_dir`` is set, and returns the report. An env
    with several tasks runs ``settings.num_episodes`` per task and eval.json adds ``tasks`` (per task, per
    group, overall, and the mean of the group means; see :func:`~embodied_eval.report.summarize_tasks`).

    Args:
        env_options: the env's options (``--env-option``; from Python: field values of its options class).
        env_flags: its option flags as typed (``{"task": "reach-v3"}``), parsed by the options class.
        allow_external_references: let the checkpoint's policy folder make us read files outside it
            (``embodied_core.load_policy``'s argument).
    """
    settings = settings or RolloutSettings()
    _check_settings(settings, baselines)
    if (checkpoint is None) == (server is None):
        raise UsageError("give either CHECKPOINT or --server URL")
    factory, options = resolve_env(env, flags=env_flags, env_options=env_options)
    output_dir = Path(output_dir)

    def load() -> Any:
        if server is not None:
            from embodied_eval.client import RemotePolicy

            return RemotePolicy(server, api_key=api_key)
        from embodied_core import load_policy

        return load_policy(checkpoint, device=device, seed=policy_seed,
                           allow_external_references=allow_external_references)

    first = load()
    metadata = first.metadata

    if settings.replan_steps is not None and settings.replan_steps > metadata.action_horizon:
        raise UsageError(f"--replan-steps {settings.replan_steps} exceeds the policy's action horizon "
                         f"{metadata.action_horizon}")

    def make_env() -> EvalEnv:
        return factory(metadata, max_steps=settings.max_steps)

    probe = make_env()  # checks the env fits the policy before any rollout
    fps = probe.layout.fps if metadata.fps is None else metadata.fps
    tasks, groups, hold = probe.tasks, probe.task_groups, probe.hold_action_for
    env_record = {"name": env, "versions": probe.versions, "max_steps": settings.max_steps or probe.max_steps,
                  "options": options, "action_semantics": probe.action_semantics, **probe.describe()}
    probe.close()

    policy_settings = attrs.evolve(settings, video_dir=output_dir / "videos" if settings.video_dir else None)
    results, wall_s = _run(metadata.model_name, _PolicyPool(first, load), make_env, policy_settings,
                           output_dir=output_dir, fps=fps, show_progress=show_progress, tasks=tasks)
    document = _document(kind="server" if server else "checkpoint", name=metadata.model_name, metadata=metadata,
                         server=server, env=env_record, settings=settings, results=results, wall_s=wall_s,
                         groups=groups if tasks else None)
    write_json(output_dir / "eval.json", document)
    policy_name = (f"{metadata.model_name} (step {metadata.step})" if metadata.step is not None
                   else metadata.model_name)
    rows = [{"name": policy_name, **document["summary"]}]
    per_task = {policy_name: document["tasks"]} if tasks else {}

    baseline_docs: dict[str, dict[str, Any]] = {}
    local_checkpoint = str(checkpoint) if checkpoint is not None else metadata.checkpoint
    for name in baselines:
        baseline = make_baseline(name, metadata, checkpoint=local_checkpoint, hold=hold,
                                 allow_external_references=allow_external_references)
        out = output_dir / "baselines" / name
        runs = attrs.evolve(settings, replan_steps=1, ensemble_decay=None,
                            video_dir=out / "videos" if settings.video_dir else None)
        b_results, b_wall = _run(f"baseline {name}", lambda b=baseline: b, make_env, attrs.evolve(runs, num_envs=1),
                                 output_dir=out, fps=fps, show_progress=show_progress, tasks=tasks)
        doc = _document(kind="baseline", name=name, metadata=baseline.metadata, server=None, env=env_record,
                        settings=runs, results=b_results, wall_s=b_wall, groups=groups if tasks else None)
        write_json(out / "eval.json", doc)
        baseline_docs[name] = doc
        rows.append({"name": f"baseline: {name}", **doc["summary"]})
        if tasks:
            per_task[f"baseline: {name}"] = doc["tasks"]
    seeds = f"seeds {settings.seed}..{settings.seed + settings.num_episodes - 1}"
    per = f" per task x {len(tasks)} tasks" if len(tasks) > 1 else ""
    table = render_table(rows, title=f"{env}: {settings.num_episodes} episodes{per}, {seeds}")
    if len(tasks) > 1:
        table += "\n" + render_task_table(per_task, title=f"{env}: success per task and group")
    return EvalReport(document=document, baselines=baseline_docs, table=table, path=output_dir / "eval.json")


def _document(*, kind: str, name: str, metadata: Any, server: str | None, env: dict[str, Any],
              settings: RolloutSettings, results: Sequence[EpisodeResult], wall_s: float,
              groups: Mapping[str, Sequence[str]] | None) -> dict[str, Any]:
    from embodied_core.config.provenance import embodied_versions

    document = {
        "policy": {"kind": kind, "name": name, "server": server, "metadata": metadata.to_dict()},
        "env": env,
        "settings": {"episodes": settings.num_episodes, "seed": settings.seed, "num_envs": settings.num_envs,
                     "replan_steps": settings.replan_steps or metadata.action_horizon,
                     "temporal_ensemble_decay": settings.ensemble_decay},
        "summary": summarize(results),
        "episodes": [r.to_dict() for r in results],
        "versions": embodied_versions(),
        "wall_s": wall_s,
    }
    if groups is not None:
        document["tasks"] = summarize_tasks(results, groups)
    return document
