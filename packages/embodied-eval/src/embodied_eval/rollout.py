"""Closed-loop rollouts: episodes of an :class:`~embodied_eval.envs.base.EvalEnv` driven by a policy.

Episode ``i`` is seeded with ``seed + i`` and starts with ``policy.reset()``, so its outcome depends on neither
the number of parallel environments nor the order episodes finish in. With ``num_envs > 1`` every worker
thread owns one environment and one policy (``make_policy`` is called once per worker). An env with several
tasks (:attr:`EvalEnv.tasks`) runs ``num_episodes`` per task, as lerobot-eval does: episode ``i`` of every task
uses seed ``seed + i``, and episodes are numbered task after task.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_eval.chunking import ChunkedController
from embodied_eval.envs.base import EvalEnv

__all__ = ["EpisodeResult", "RolloutSettings", "episode_plan", "run_episode", "run_episodes"]


@attrs.frozen(kw_only=True)
class RolloutSettings:
    """How episodes are run."""

    num_episodes: int = 50
    seed: int = 0
    num_envs: int = 1
    max_steps: int | None = None
    """Steps per episode; None: the environment's default."""
    replan_steps: int | None = None
    """Actions executed per predicted chunk; None: the whole chunk."""
    ensemble_decay: float | None = None
    """Temporal ensembling decay (None: off)."""
    video_dir: Path | None = None
    """Where ``episode_<i>.mp4`` files go (None: no videos)."""


@attrs.frozen(kw_only=True)
class EpisodeResult:
    """The outcome of one episode."""

    index: int
    seed: int
    success: bool
    episode_return: float
    length: int
    predictions: int
    wall_s: float
    video: str | None = None
    task: str | None = None
    """The env task the episode ran in (envs with several tasks), else None."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (``return`` for :attr:`episode_return`)."""
        record = attrs.asdict(self)
        record["return"] = record.pop("episode_return")
        return record


def run_episode(env: EvalEnv, controller: ChunkedController, *, index: int, seed: int, max_steps: int,
                frames: list[np.ndarray] | None = None, task: str | None = None) -> EpisodeResult:
    """Runs one episode (in ``task`` for an env with several); appends the frame of every step to ``frames``
    when given (the observation's own frame: nothing is rendered twice)."""
    started = time.perf_counter()
    controller.reset()
    before = controller.num_predictions
    observation = env.reset(seed, task=task)
    if frames is not None:
        frames.append(env.video_frame())
    total, success, length = 0.0, False, 0
    while length < max_steps:
        step = env.step(controller.act(observation))
        length += 1
        total += step.reward
        if frames is not None:
            frames.append(env.video_frame())
        if step.success:
            success = True
        if step.done:
            break
        observation = step.observation
    return EpisodeResult(index=index, seed=seed, success=success, episode_return=total, length=length,
                         predictions=controller.num_predictions - before, wall_s=time.perf_counter() - started,
                         task=task)


def episode_plan(settings: RolloutSettings, tasks: tuple[str, ...] = ()) -> list[tuple[int, str | None]]:
    """``[(seed, task)]`` by episode index: ``num_episodes`` seeds, once per task when ``tasks`` is given."""
    seeds = [settings.seed + i for i in range(settings.num_episodes)]
    if not tasks:
        return [(seed, None) for seed in seeds]
    return [(seed, task) for task in tasks for seed in seeds]


def run_episodes(make_policy: Callable[[], Any], make_env: Callable[[], EvalEnv], settings: RolloutSettings, *,
                 on_episode: Callable[[EpisodeResult], None] | None = None,
                 on_frames: Callable[[EpisodeResult, list[np.ndarray]], str | None] | None = None,
                 tasks: tuple[str, ...] = ()) -> list[EpisodeResult]:
    """Runs the episodes of :func:`episode_plan` on ``settings.num_envs`` worker threads; results by index.

    ``on_frames(result, frames)`` (when video is on) stores an episode's frames and returns the file it wrote.
    The first failure in any worker stops the others and is raised here.
    """
    plan = episode_plan(settings, tasks)
    jobs: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(plan)):
        jobs.put(index)
    results: dict[int, EpisodeResult] = {}
    failures: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            env = make_env()
            try:
                policy = make_policy()
                horizon = policy.metadata.action_horizon
                controller = ChunkedController(policy, replan_steps=min(settings.replan_steps or horizon, horizon),
                                               ensemble_decay=settings.ensemble_decay)
                max_steps = settings.max_steps or env.max_steps
                while not failures:
                    try:
                        index = jobs.get_nowait()
                    except queue.Empty:
                        return
                    frames: list[np.ndarray] | None = [] if on_frames is not None else None
                    seed, task = plan[index]
                    result = run_episode(env, controller, index=index, seed=seed, max_steps=max_steps,
                                         frames=frames, task=task)
                    if on_frames is not None and frames is not None:
                        result = attrs.evolve(result, video=on_frames(result, frames))
                    with lock:
                        results[index] = result
                    if on_episode is not None:
                        on_episode(result)
            finally:
                env.close()
        except BaseException as exc:  # re-raised in the calling thread
            with lock:
                failures.append(exc)

    threads = [threading.Thread(target=worker, name=f"embodied-eval-{k}", daemon=True)
               for k in range(max(1, min(settings.num_envs, len(plan))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return [results[i] for i in range(len(plan))]
