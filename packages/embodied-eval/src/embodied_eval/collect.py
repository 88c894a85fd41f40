"""``embodied data collect``: record an env plugin's scripted expert as a LeRobot v3.0 dataset.

Generic over env plugins whose env offers an expert (:attr:`EvalEnv.has_expert`: metaworld's
``metaworld.policies``, synth_reach's synth-writer expert). For every task of the env (``--task``/``--suite``),
``num_episodes`` episodes are recorded: attempt ``k`` of a task runs from seed ``seed + k``; an episode the expert
fails is not recorded (unless ``keep_failures``) and the next seed is tried, so the dataset is the same however
often the run was interrupted. Rows are ``(observation_t, action_t)``: the frame and state before each action, and
the expert's action clipped to the env's action space (MetaWorld's experts emit up to +-25; the env would clip
them itself, so clipping changes no transition but keeps the recorded actions in the space a policy acts in).

``meta/collect.json`` records what was run (env, options, seeds, the expert's outcomes); re-running the same
command continues where it stopped, a different one into the same folder is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import DataError, UsageError
from embodied_eval.env_options import resolve_env
from embodied_eval.envs.base import EvalEnv

__all__ = ["POLICIES", "CollectSettings", "CollectSummary", "collect_dataset"]

POLICIES = ("expert",)
STATE_FILE = "meta/collect.json"
_IDENTITY = ("env", "options", "policy", "seed", "keep_failures", "max_steps", "env_settings")
"""collect.json keys a continued run must share with the folder's (``episodes_per_task`` may grow)."""


@attrs.frozen(kw_only=True)
class CollectSettings:
    """How many episodes to record and how."""

    num_episodes: int = 50
    """Episodes per task."""
    seed: int = 0
    """Attempt k of a task runs from seed ``seed + k``."""
    keep_failures: bool = False
    """Record the expert's failed episodes too (default: only successes)."""
    max_steps: int | None = None
    """Episode length cap (default: the env's)."""
    policy: str = "expert"
    max_failures: int | None = None
    """Failed attempts per task before giving up (default: max(10, num_episodes))."""

    def problems(self) -> list[str]:
        """Invalid settings, one message each."""
        out = []
        if self.num_episodes < 1:
            out.append(f"--episodes must be >= 1 (got {self.num_episodes})")
        if self.max_steps is not None and self.max_steps < 1:
            out.append(f"--max-steps must be >= 1 (got {self.max_steps})")
        if self.policy not in POLICIES:
            out.append(f"--policy {self.policy!r}: valid: {', '.join(POLICIES)}")
        return out


@attrs.frozen(kw_only=True)
class CollectSummary:
    """What the dataset holds after the run."""

    root: Path
    num_episodes: int
    num_frames: int
    fps: int
    tasks: tuple[str, ...]
    attempts: int
    """Expert episodes run for the dataset, over all runs that wrote it."""
    failures: int
    new_episodes: int
    """Episodes this run recorded."""
    wall_s: float


@attrs.frozen
class _Episode:
    success: bool
    state: np.ndarray
    action: np.ndarray
    frames: dict[str, np.ndarray]
    task_text: str


def _run_expert(env: EvalEnv, *, seed: int, task: str | None, max_steps: int,
                bounds: tuple[np.ndarray, np.ndarray] | None) -> _Episode:
    observation = env.reset(seed, task=task)
    keys = env.metadata.camera_keys
    frames: dict[str, list[np.ndarray]] = {key: [] for key in keys}
    states, actions = [], []
    success = False
    for _ in range(max_steps):
        for key in keys:
            frames[key].append(observation[key])
        states.append(np.asarray(observation[env.metadata.state_key], np.float32))
        action = env.expert_action()
        if bounds is not None:
            action = np.clip(action, bounds[0], bounds[1])
        actions.append(action.astype(np.float32))
        step = env.step(action)
        success = success or step.success
        if step.done:
            break
        observation = step.observation
    return _Episode(success=success, state=np.stack(states), action=np.stack(actions),
                    frames={k: np.stack(v) for k, v in frames.items()}, task_text=env.task_text)


def _write_state(root: Path, state: Mapping[str, Any]) -> None:
    path = root / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def _load_state(root: Path, identity: Mapping[str, Any]) -> dict[str, Any] | None:
    """The folder's collect.json trimmed to the episodes its dataset holds; None for a new folder."""
    if not root.exists() or not any(root.iterdir()):
        return None
    info_path, state_path = root / "meta" / "info.json", root / STATE_FILE
    if not info_path.is_file() or not state_path.is_file():
        raise UsageError(f"--out {root}: the folder is not empty and is not a dataset `embodied data collect` "
                         f"wrote ({'no meta/info.json' if not info_path.is_file() else 'no ' + STATE_FILE}); "
                         "choose another folder")
    state = json.loads(state_path.read_text())
    changed = [key for key in _IDENTITY if state.get(key) != identity.get(key)]
    if changed:
        detail = "; ".join(f"{k}: {state.get(k)!r} there, {identity.get(k)!r} now" for k in changed)
        raise UsageError(f"--out {root} was collected with other settings ({detail}); continue it with the same "
                         "command, or choose another folder")
    total = json.loads(info_path.read_text())["total_episodes"]
    # An episode listed but not in the dataset was being written when the run stopped: it is run again.
    state["episodes"] = state["episodes"][:total]
    return state


def _next_seed(state: Mapping[str, Any], task: str | None, first: int) -> int:
    tried = [e["seed"] for e in (*state["episodes"], *state["failures"]) if e["task"] == task]
    return max(tried) + 1 if tried else first


def collect_dataset(env: str, output: str | Path, settings: CollectSettings, *,
                    env_flags: Mapping[str, str] | None = None, env_options: Mapping[str, Any] | None = None,
                    show_progress: bool = True) -> CollectSummary:
    """Records ``settings.num_episodes`` expert episodes per task of env plugin ``env`` into ``output``.

    Raises:
        UsageError: bad settings, an env without an expert, or a folder collected with other settings.
        DataError: the expert keeps failing on a task (``max_failures``); what was recorded stays usable.
    """
    from embodied_data.lerobot.writer import DatasetLayout, EpisodeWriter

    problems = settings.problems()
    if problems:
        raise UsageError("; ".join(problems))
    started = time.perf_counter()
    root = Path(output)
    factory, options = resolve_env(env, flags=env_flags, env_options=env_options)
    sim = factory(None, max_steps=settings.max_steps)
    try:
        if not sim.has_expert:
            raise UsageError(f"--env {env} has no scripted expert to record; envs with one: metaworld, synth_reach")
        layout = sim.layout
        if abs(layout.fps - round(layout.fps)) > 1e-9:
            raise UsageError(f"--env {env} runs at {layout.fps} fps; LeRobot videos need a whole number")
        data_layout = DatasetLayout(fps=round(layout.fps), state_dim=layout.state_dim, action_dim=layout.action_dim,
                                    cameras={key: layout.image_shape[:2] for key in layout.camera_keys},
                                    state_names=layout.state_names, action_names=layout.action_names,
                                    robot_type=env)
        identity = {"env": env, "options": options, "policy": settings.policy, "seed": settings.seed,
                    "keep_failures": settings.keep_failures, "max_steps": settings.max_steps or sim.max_steps,
                    "env_settings": sim.describe()}
        state = _load_state(root, identity)
        if state is None:
            writer = EpisodeWriter.create(root, data_layout)
            state = {**identity, "episodes": [], "failures": []}
        else:
            writer = EpisodeWriter.open(root, data_layout)
        state["episodes_per_task"] = settings.num_episodes
        before = writer.num_episodes
        tasks: tuple[str | None, ...] = sim.tasks or (None,)
        limit = settings.max_failures or max(10, settings.num_episodes)
        advance, finish = _progress(len(tasks) * settings.num_episodes, env, show_progress)
        try:
            advance(len(state["episodes"]))
            for task in tasks:
                _collect_task(sim, writer, state, task=task, settings=settings, limit=limit, root=root,
                              advance=advance)
        finally:
            finish()
        attempts = len(state["episodes"]) + len(state["failures"])
        successes = sum(e["success"] for e in state["episodes"])
        return CollectSummary(root=root, num_episodes=writer.num_episodes, num_frames=writer.num_frames,
                              fps=data_layout.fps, tasks=writer.tasks, attempts=attempts,
                              failures=attempts - successes,
                              new_episodes=writer.num_episodes - before, wall_s=time.perf_counter() - started)
    finally:
        sim.close()


def _collect_task(sim: EvalEnv, writer: Any, state: dict[str, Any], *, task: str | None,
                  settings: CollectSettings, limit: int, root: Path, advance: Callable[[int], None]) -> None:
    bounds = sim.action_bounds
    max_steps = settings.max_steps or sim.max_steps
    seed = _next_seed(state, task, settings.seed)
    while sum(e["task"] == task for e in state["episodes"]) < settings.num_episodes:
        failed = [f for f in state["failures"] if f["task"] == task]
        if len(failed) >= limit:
            done = sum(e["task"] == task for e in state["episodes"])
            raise DataError(f"{root}: the expert failed {len(failed)} episodes of {task or sim.name} (seeds "
                            f"{', '.join(str(f['seed']) for f in failed[:5])}{', ...' if len(failed) > 5 else ''}) "
                            f"and succeeded in {done}; stopped. What was recorded is a valid dataset; "
                            "--keep-failures records failed episodes too")
        episode = _run_expert(sim, seed=seed, task=task, max_steps=max_steps, bounds=bounds)
        record = {"task": task, "seed": seed, "success": episode.success, "length": int(episode.action.shape[0])}
        if episode.success or settings.keep_failures:
            state["episodes"].append({"index": writer.num_episodes, "task_text": episode.task_text, **record})
            _write_state(root, state)  # before the episode: a stop in between re-runs this seed
            writer.add_episode(state=episode.state, action=episode.action, frames=episode.frames,
                               task=episode.task_text)
            advance(1)
        else:
            state["failures"].append(record)
            _write_state(root, state)
        seed += 1


def _progress(total: int, env: str, show: bool) -> tuple[Callable[[int], None], Callable[[], None]]:
    if not show:
        return (lambda n: None), (lambda: None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(stderr=True))
    bar = progress.add_task(f"collect {env} (expert)", total=total)
    progress.start()
    return (lambda n: progress.update(bar, advance=n)), progress.stop
