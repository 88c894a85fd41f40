"""``metaworld``: MetaWorld v3 tasks for ``embodied eval`` and ``embodied data collect``.

Observations are lerobot-eval's: one camera, ``observation.image`` (corner2, flipped on both axes), the 4-D
``observation.state`` (end-effector xyz, gripper opening) and the task's instruction as ``task``; the action is
MetaWorld's 4-D motion command (xyz motion in [-1, 1], 1 cm per unit, and the gripper command), sent as float32.
An episode ends at MetaWorld's first success or after 500 steps. ``--task`` (or a comma-separated list) or
``--suite`` picks the tasks; with several, ``embodied eval`` runs ``--episodes`` per task (seeds ``--seed + i``
for each, as lerobot-eval does) and reports per task, per difficulty group and overall.

``--render lerobot`` gives lerobot's frames exactly (480 x 480, MetaWorld's default look) for checkpoints
trained on lerobot's MetaWorld data; the default ``fast`` look renders ``--image-size`` frames (the policy's
frame size by default) without shadows or anti-aliasing, several times faster on a CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from embodied_core.errors import UsageError
from embodied_core.protocols import PolicyMetadata
from embodied_eval.envs.base import EnvLayout, EvalEnv, distribution_versions
from embodied_eval.envs.metaworld.gym_env import CAMERA, LEROBOT_IMAGE_SIZE, MAX_EPISODE_STEPS, MetaworldEnv
from embodied_eval.envs.metaworld.options import DEFAULT_IMAGE_SIZE, MetaworldOptions
from embodied_eval.envs.metaworld.tasks import TaskSelection, description, select_tasks

__all__ = ["ACTION_NAMES", "CAMERA_KEY", "FPS", "STATE_NAMES", "MetaworldEvalEnv", "gripper_hold_command", "make_env"]

CAMERA_KEY = "observation.image"
"""The key lerobot-eval gives MetaWorld's frame (``features_map``: ``pixels/top`` -> ``observation.image``)."""
STATE_NAMES = ("x", "y", "z", "gripper_opening")
"""``agent_pos``: end-effector position (m) and the gripper opening (1 = open)."""
ACTION_NAMES = ("dx", "dy", "dz", "gripper")
"""MetaWorld's action: end-effector motion (1 cm per unit, clipped to [-1, 1]) and the gripper command
(+1 closes, -1 opens)."""
FPS = 80.0
"""MetaWorld's control rate (``metadata["render_fps"]``: 5 substeps of 2.5 ms)."""
_FINGER_TRAVEL_PER_OPENING = 0.05
"""Metres each finger moves per unit of the observed opening (measured: closing both fingers by 1 cm each
lowers the opening by 0.2); the finger actuators are position servos whose target is the command in metres."""


def gripper_hold_command(opening: float) -> float:
    """The gripper command that keeps MetaWorld's gripper at ``opening`` (``agent_pos[3]``; 1 = fully open).

    Fully open (the opening saturates at 1): -1, which holds both fingers on their open stops as MetaWorld's
    own hand reset does. Otherwise the finger servos' target equal to where the fingers are, so they neither
    open nor close.
    """
    if opening >= 1.0:
        return -1.0
    return float((1.0 - max(opening, 0.0)) * _FINGER_TRAVEL_PER_OPENING)


class MetaworldEvalEnv(EvalEnv):
    """The MetaWorld tasks of one selection, one lerobot-style env per task (built when first used)."""

    action_semantics = "delta"

    def __init__(self, selection: TaskSelection, *, metadata: PolicyMetadata | None, look: str, image_size: int,
                 max_steps: int) -> None:
        self._selection = selection
        self._look, self._image_size = look, image_size
        self._envs: dict[str, MetaworldEnv] = {}
        first = selection.tasks[0]
        layout = EnvLayout(camera_keys=(CAMERA_KEY,), image_shape=(image_size, image_size, 3), state_dim=4,
                           action_dim=4, fps=FPS, task=description(first), state_names=STATE_NAMES,
                           action_names=ACTION_NAMES)
        super().__init__(self._env_for(first), name="metaworld", layout=layout, metadata=metadata,
                         cameras=(CAMERA,), max_steps=max_steps,
                         versions=distribution_versions("metaworld", "mujoco", "gymnasium"))

    @property
    def tasks(self) -> tuple[str, ...]:
        """The selected MetaWorld tasks."""
        return self._selection.tasks

    @property
    def task_groups(self) -> Mapping[str, tuple[str, ...]]:
        """lerobot's difficulty groups of the selected tasks."""
        return self._selection.groups

    def describe(self) -> dict[str, Any]:
        """Rendering and tasks, for eval.json and a collected dataset's collect.json."""
        render = {"look": self._look, "image_size": [self._image_size, self._image_size], "camera": CAMERA,
                  "lerobot_frames": self._look == "lerobot",
                  "note": ("480 x 480, MetaWorld's default look: lerobot-eval's frames" if self._look == "lerobot"
                           else "rendered at this size by MetaWorld, shadows and anti-aliasing off (not "
                                "lerobot's frames)")}
        return {"render": render, "tasks": list(self.tasks), "task_groups": {g: list(t) for g, t in
                                                                            self.task_groups.items()}}

    def reset(self, seed: int, *, task: str | None = None) -> dict[str, Any]:
        """Starts an episode of ``task`` (default: the first selected) from ``seed``."""
        name = self.tasks[0] if task is None else task
        if name not in self._selection.tasks:
            raise UsageError(f"metaworld: {name!r} is not among the selected tasks ({', '.join(self.tasks)})")
        self.env = self._env_for(name)
        return super().reset(seed)

    def _env_for(self, task: str) -> MetaworldEnv:
        if task not in self._envs:
            self._envs[task] = MetaworldEnv(task, look=self._look, image_size=self._image_size)
        return self._envs[task]

    def _observation(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        self._task = self.env.task_description
        return super()._observation(raw)

    def step(self, action: np.ndarray) -> Any:
        """Applies one 4-D action (sent as float32, as lerobot-eval does)."""
        return super().step(np.asarray(action, dtype=np.float32).reshape(-1))

    def hold_action_for(self, state: np.ndarray) -> np.ndarray:
        """No motion, and the gripper command that keeps the observed opening (``state[3]``)."""
        state = np.asarray(state, dtype=np.float32).reshape(-1)
        if state.shape != (4,):
            raise UsageError(f"metaworld: a state has 4 values (xyz, gripper opening), got {state.size}")
        return np.array([0.0, 0.0, 0.0, gripper_hold_command(float(state[3]))], np.float32)

    def close(self) -> None:
        """Releases every task's simulator."""
        for env in self._envs.values():
            env.close()
        self._envs.clear()


def make_env(metadata: PolicyMetadata | None, *, max_steps: int | None = None,
             options: MetaworldOptions) -> MetaworldEvalEnv:
    """The ``metaworld`` plugin (see the module docstring)."""
    selection = select_tasks(options.task, options.suite)
    policy_side = None if metadata is None else metadata.image_shape[:2]
    if options.render == "lerobot":
        if options.image_size not in (None, LEROBOT_IMAGE_SIZE):
            raise UsageError(f"--render lerobot gives lerobot's {LEROBOT_IMAGE_SIZE} x {LEROBOT_IMAGE_SIZE} frames; "
                             f"--image-size {options.image_size} needs --render fast")
        size = LEROBOT_IMAGE_SIZE
    else:
        if policy_side is not None and policy_side[0] != policy_side[1]:
            raise UsageError(f"metaworld renders square frames; the policy reads {policy_side[0]} x "
                             f"{policy_side[1]} (use --render lerobot to have 480 x 480 frames resized)")
        size = options.image_size or (policy_side[0] if policy_side else DEFAULT_IMAGE_SIZE)
        if policy_side is not None and size != policy_side[0]:
            raise UsageError(f"--image-size {size}: the policy reads {policy_side[0]} x {policy_side[1]} frames, and "
                             f"the fast look renders at the policy's size (omit --image-size)")
    if max_steps is not None and max_steps > MAX_EPISODE_STEPS:
        raise UsageError(f"--max-steps {max_steps}: MetaWorld episodes end at step {MAX_EPISODE_STEPS}")
    return MetaworldEvalEnv(selection, metadata=metadata, look=options.render, image_size=size,
                            max_steps=max_steps or MAX_EPISODE_STEPS)
