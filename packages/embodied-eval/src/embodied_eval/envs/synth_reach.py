"""``synth_reach``: the task ``embodied data synth`` records, as a gymnasium environment.

Same simulation and pictures as the dataset, through the same code (:mod:`embodied_data.synth.task`): an
episode draws its target path(s) and the arm's start with the writer's ``simulate_episode`` (from a generator
seeded with the episode's seed), and every frame is drawn by ``render_frames``. The action is the end-point
position commanded for the next frame (as in the data); the arm goes there, clipped to the workspace and to
``TaskParams.max_step`` per frame, the largest step the recorded expert ever takes (so the limit never changes
a recorded transition).

Success: the end-point lies on the target disk as drawn (within :data:`SUCCESS_RADIUS`) for ``hold_frames``
consecutive frames (default 3), i.e. the arm reached the target and stopped on it rather than sweeping across
it: with a single frame, uniformly random commands succeed in 43% of 40-step episodes (7% with 3 frames), while
the recorded expert succeeds in every episode either way. The reward is 1 for every frame on the target. With
``num_tasks=2`` the episode's task (``info["task"]``) names the colour.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from embodied_core.errors import UsageError
from embodied_core.protocols import PolicyMetadata
from embodied_data.synth.task import TASKS, Episode, TaskParams, expert_command, render_frames, simulate_episode
from embodied_eval.envs.base import EnvLayout, EvalEnv, distribution_versions

__all__ = ["GYM_ID", "SUCCESS_RADIUS", "SynthReachEnv", "make_env"]

GYM_ID = "embodied_eval/SynthReach-v0"
"""``gymnasium.make(GYM_ID, cameras=("front",), ...)`` once this module is imported."""

SUCCESS_RADIUS = 0.14
"""Workspace units: the radius of the target disk ``render_frames`` draws (7% of the image side, and the
workspace spans 2 units), so success means the arm is on the target in the picture."""

VIEWS = ("front", "wrist")


class SynthReachEnv(gym.Env):
    """Point arm reaching a moving target; observations ``{"pixels": {view: uint8 HxWx3}, "agent_pos": [2]}``.

    Args:
        image_size: (height, width) of the rendered frames (the synth default is 96 x 96).
        cameras: views to render, any of ``front`` and ``wrist``.
        num_tasks: 1 (red target) or 2 (red or green, named by ``info["task"]``).
        fps: control rate; the targets drift in workspace units per second, as in the data.
        max_episode_steps: steps before the episode is truncated (40: the synth writer's shortest episode).
        hold_frames: consecutive frames on the target that count as success.
        params: the task's dynamics (the synth writer's defaults).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, *, image_size: tuple[int, int] = (96, 96), cameras: tuple[str, ...] = ("front",),
                 num_tasks: int = 1, fps: float = 10.0, max_episode_steps: int = 40, hold_frames: int = 3,
                 params: TaskParams | None = None, render_mode: str | None = "rgb_array") -> None:
        bad = [c for c in cameras if c not in VIEWS]
        if bad or not cameras:
            raise ValueError(f"cameras {list(cameras)}: choose from {', '.join(VIEWS)}")
        if max_episode_steps < 1 or hold_frames < 1:
            raise ValueError(f"max_episode_steps and hold_frames must be >= 1 (got {max_episode_steps}, "
                             f"{hold_frames})")
        self.image_size = (int(image_size[0]), int(image_size[1]))
        self.cameras = tuple(cameras)
        self.fps = float(fps)
        self.max_episode_steps = max_episode_steps
        self.hold_frames = hold_frames
        self.params = params or TaskParams(num_tasks=num_tasks)
        self.render_mode = render_mode
        height, width = self.image_size
        self.observation_space = spaces.Dict({
            "pixels": spaces.Dict({c: spaces.Box(0, 255, (height, width, 3), np.uint8) for c in self.cameras}),
            "agent_pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
        })
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._targets = np.zeros((self.params.num_tasks, 1, 2), np.float32)
        self._arm = np.zeros(2, np.float32)
        self._task_index = 0
        self._step = 0
        self._on_target = 0

    # ------------------------------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Starts an episode; ``seed`` fixes the target path, the arm's start and (``seed % num_tasks``) the task."""
        super().reset(seed=seed)
        task_index = (seed or 0) % self.params.num_tasks
        # The synth writer's episode draw: target paths first, then the arm's start (its expert actions unused).
        episode = simulate_episode(self.np_random, length=self.max_episode_steps + 1, fps=self.fps,
                                   task_index=task_index, params=self.params)
        self._targets = episode.targets
        self._arm = episode.state[0].copy()
        self._task_index = task_index
        self._step = 0
        self._on_target = 0
        return self._observation(), self._info(success=False)

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Moves the arm toward the commanded end-point; returns (obs, reward, terminated, truncated, info)."""
        command = np.asarray(action, dtype=np.float64).reshape(-1)
        if command.shape != (2,) or not np.all(np.isfinite(command)):
            raise ValueError(f"synth_reach: an action is a finite end-point position [x, y], got {action!r}")
        goal = np.clip(command, -1.0, 1.0)
        move = goal - self._arm
        norm = float(np.linalg.norm(move))
        # Within reach the arm lands exactly on the command, as every recorded transition does (state t+1 ==
        # action t; the expert's longest steps are max_step up to float32 rounding, hence the tolerance);
        # farther commands move it by max_step toward them.
        reach = self.params.max_step * (1 + 1e-5)
        arm = goal if norm <= reach else self._arm + move * (self.params.max_step / norm)
        self._arm = arm.astype(np.float32)
        self._step += 1
        on_target = self.distance() < SUCCESS_RADIUS
        self._on_target = self._on_target + 1 if on_target else 0
        success = self._on_target >= self.hold_frames
        truncated = not success and self._step >= self.max_episode_steps
        return self._observation(), float(on_target), success, truncated, self._info(success=success)

    def render(self) -> np.ndarray:
        """The front view at the current step (uint8 HxWx3), whatever cameras the observations carry."""
        return self._frame("front")

    # ------------------------------------------------------------------------------------------ helpers
    @property
    def task(self) -> str:
        """The episode's instruction (the synth dataset's task text)."""
        return TASKS[self._task_index]

    def expert_action(self) -> np.ndarray:
        """The synth writer's expert command for now (what a recorded synth episode's action is)."""
        goal = self._targets[self._task_index, min(self._step, self._targets.shape[1] - 1)]
        return expert_command(self._arm.astype(np.float64), goal, self.params).astype(np.float32)

    def distance(self) -> float:
        """Distance from the end-point to the episode's target now."""
        return float(np.linalg.norm(self._arm - self._targets[self._task_index, self._step]))

    def _frame(self, view: str) -> np.ndarray:
        now = Episode(task_index=self._task_index, targets=self._targets[:, self._step : self._step + 1],
                      state=self._arm[None], action=self._arm[None])
        return render_frames(now, height=self.image_size[0], width=self.image_size[1], view=view)[0]

    def _observation(self) -> dict[str, Any]:
        return {"pixels": {c: self._frame(c) for c in self.cameras}, "agent_pos": self._arm.copy()}

    def _info(self, *, success: bool) -> dict[str, Any]:
        return {"is_success": success, "task": self.task, "distance": self.distance()}


if GYM_ID not in gym.registry:
    gym.register(id=GYM_ID, entry_point=SynthReachEnv)


def make_env(metadata: PolicyMetadata | None, *, max_steps: int | None = None, num_tasks: int = 1,
             hold_frames: int = 3) -> EvalEnv:
    """The ``synth_reach`` plugin: renders the policy's cameras (``observation.images.front`` / ``.wrist``) at its
    image size and control rate; without a policy, the synth writer's defaults (front camera, 96 x 96, 10 fps)."""
    layout = EnvLayout(camera_keys=("observation.images.front",), image_shape=(96, 96, 3), state_dim=2,
                       action_dim=2, fps=10.0, task=TASKS[0], state_names=("x", "y"), action_names=("x", "y"))
    meta = metadata or layout.as_metadata(model_name="none")
    views = tuple(key.rsplit(".", 1)[-1] for key in meta.camera_keys)
    unknown = [key for key, view in zip(meta.camera_keys, views, strict=True) if view not in VIEWS]
    if unknown:
        raise UsageError(f"synth_reach renders observation.images.front and observation.images.wrist; the policy "
                         f"reads {', '.join(unknown)}")
    max_steps = max_steps or 40  # the synth writer's shortest episode
    if num_tasks not in (1, 2):
        raise UsageError(f"synth_reach: num_tasks must be 1 or 2 (got {num_tasks})")
    env = SynthReachEnv(image_size=meta.image_shape[:2], cameras=views, num_tasks=num_tasks,
                        fps=meta.fps or layout.fps, max_episode_steps=max_steps, hold_frames=hold_frames)
    return EvalEnv(env, name="synth_reach", layout=layout, metadata=metadata, cameras=views,
                   max_steps=max_steps, versions=distribution_versions("embodied-data", "gymnasium"))
