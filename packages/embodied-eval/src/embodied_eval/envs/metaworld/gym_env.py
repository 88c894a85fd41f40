"""One MetaWorld task as a gymnasium environment, with lerobot 0.6.1's ``MetaworldEnv`` conventions.

What lerobot's env does, and this one therefore does (the golden ``fixtures/metaworld_lerobot`` was recorded
through lerobot's and is replayed exactly by the tests):

- the MetaWorld env is built lazily on the first ``reset`` (so it, and its GL context, belong to the thread
  that steps it): ``MT1(task, seed=42)``, the task class with ``render_mode="rgb_array"`` and camera
  ``corner2``, ``set_task(train_tasks[0])``, camera 2 (``corner2``) moved to ``(0.75, 0.075, 0.7)``, one reset
  with the task's frozen object positions, then ``_freeze_rand_vec = False`` and ``seeded_rand_vec = True``
  so every later reset draws positions from the env's own seeded generator;
- ``reset(seed=s)`` seeds that generator with ``env.seed(s)`` first (MetaWorld's ``reset`` ignores its seed
  argument); ``reset()`` without a seed continues the stream;
- observations ``{"pixels": frame, "agent_pos": raw_obs[:4]}``: the corner2 frame flipped on both axes (uint8
  RGB, C-contiguous) and the end-effector xyz plus gripper opening (float64);
- ``step(action)`` passes the action on as given (lerobot neither clips nor casts; MetaWorld computes the mocap
  motion in the action's dtype, so policies must send float32, as lerobot-eval does); ``terminated`` is
  MetaWorld's success, and on that step the env resets itself without a seed (the observation returned is
  still the terminal one; the next ``step`` acts in a new episode); ``truncated`` is MetaWorld's (step 500).

``obs_type="agent_pos"`` leaves the frame out (no rendering; for state-only uses such as measuring the experts);
it is read at every step, so it may change between steps.

Two looks: ``"lerobot"`` builds MetaWorld without a size, so frames are 480 x 480 with its default rendering
(4096-px shadow map, 4x multisampling), exactly lerobot's frames; ``"fast"`` asks MetaWorld for
``image_size`` x ``image_size`` frames with shadows and multisampling off, which renders several times faster
on a CPU rasterizer but is a different picture (not a resize of lerobot's).
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from embodied_core.errors import UsageError
from embodied_eval.envs.metaworld.tasks import description, expert_class_name

__all__ = ["CAMERA", "LEROBOT_IMAGE_SIZE", "LOOKS", "MAX_EPISODE_STEPS", "OBS_TYPES", "MetaworldEnv",
           "import_metaworld"]

LOOKS = ("fast", "lerobot")
OBS_TYPES = ("pixels_agent_pos", "agent_pos")
CAMERA = "corner2"
"""lerobot's default (and our only) camera; the only one it moves and flips."""
LEROBOT_IMAGE_SIZE = 480
"""MetaWorld's default render size, which lerobot always gets (it never passes one)."""
MAX_EPISODE_STEPS = 500
"""MetaWorld's ``max_path_length``: ``truncated`` at step 500 (lerobot-eval's episode length)."""
MT1_SEED = 42
"""The seed lerobot builds ``MT1`` with (its task's positions are overwritten by the first seeded reset)."""
_CORNER2_POSITION = (0.75, 0.075, 0.7)
_CORNER2_INDEX = 2  # camera index of corner2 in every v3 model
_BUILD_LOCK = threading.Lock()
"""MT1() draws its task goals from numpy's global generator (seeding it, then restoring it): two threads
building at once interleave those draws and can trip its "unique goals" assertion, so builds are serialized."""


def import_metaworld() -> Any:
    """The ``metaworld`` package; a clear error when a file of that name shadows it (a script
    ``metaworld.py`` run by path puts its own folder first on ``sys.path``)."""
    module = importlib.import_module("metaworld")
    if not hasattr(module, "MT1"):
        raise UsageError(f"`import metaworld` found {getattr(module, '__file__', module)!r}, not the MetaWorld "
                         "package: a file named metaworld.py shadows it. Rename that file, or run the script as a "
                         "module (python -m package.script) so its folder is not first on sys.path")
    return module


class MetaworldEnv(gym.Env):
    """A MetaWorld v3 task seen as lerobot 0.6.1 sees it (see the module docstring).

    Args:
        task: a v3 task name (``button-press-topdown-v3``).
        look: ``"lerobot"`` (480 x 480, MetaWorld's default rendering) or ``"fast"``.
        image_size: frame side for ``look="fast"`` (rendered at that size); must be 480 with ``"lerobot"``.
        obs_type: ``"pixels_agent_pos"`` (lerobot-eval's) or ``"agent_pos"`` (no frame, nothing rendered).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 80}

    def __init__(self, task: str, *, look: str = "lerobot", image_size: int = LEROBOT_IMAGE_SIZE,
                 obs_type: str = "pixels_agent_pos") -> None:
        if look not in LOOKS:
            raise ValueError(f"look {look!r}: choose from {', '.join(LOOKS)}")
        if obs_type not in OBS_TYPES:
            raise ValueError(f"obs_type {obs_type!r}: choose from {', '.join(OBS_TYPES)}")
        self.obs_type = obs_type
        if look == "lerobot" and image_size != LEROBOT_IMAGE_SIZE:
            raise ValueError(f"look 'lerobot' renders {LEROBOT_IMAGE_SIZE} x {LEROBOT_IMAGE_SIZE} frames, as lerobot "
                             f"does; image_size {image_size} needs look 'fast'")
        self.task = task
        self.task_description = description(task)
        self.look = look
        self.image_size = int(image_size)
        self.render_mode = "rgb_array"
        self._max_episode_steps = MAX_EPISODE_STEPS
        side = self.image_size
        self.observation_space = spaces.Dict({
            "pixels": spaces.Box(0, 255, (side, side, 3), np.uint8),
            "agent_pos": spaces.Box(-1000.0, 1000.0, (4,), np.float64),
        })
        self.action_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self._env: Any = None
        self._expert: Any = None
        self._raw: np.ndarray | None = None

    # ------------------------------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Starts an episode; ``seed`` reseeds MetaWorld's generator (None continues it)."""
        super().reset(seed=seed)
        env = self._ensure_env()
        if seed is not None:
            env.seed(seed)
        raw, _ = env.reset(seed=seed)
        self._raw = raw
        return self._observation(raw), {"is_success": False}

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """One MetaWorld step; on success the env starts its next episode itself (see the module docstring)."""
        action = np.asarray(action)
        if action.ndim != 1:
            raise ValueError(f"metaworld: an action is one row of 4 values, got shape {action.shape}")
        env = self._ensure_env()
        raw, reward, done, truncated, info = env.step(action)
        success = bool(info["success"])
        terminated = bool(done) or success
        info = {**info, "task": self.task, "done": bool(done), "is_success": success}
        observation = self._observation(raw)
        self._raw = raw
        if terminated:
            info["final_info"] = {"task": self.task, "done": bool(done), "is_success": success}
            # lerobot resets here without a seed (the generator stream continues); the frame of that new
            # episode is never returned, so it is not rendered.
            self._raw, _ = env.reset()
        return observation, float(reward), terminated, bool(truncated), info

    def render(self) -> np.ndarray:
        """The current corner2 frame as observations carry it (flipped on both axes)."""
        return self._frame()

    def close(self) -> None:
        """Releases MetaWorld and its GL context."""
        if self._env is not None:
            self._env.close()
            self._env = None

    # ------------------------------------------------------------------------------------------ extras
    @property
    def raw_observation(self) -> np.ndarray:
        """MetaWorld's own 39-value observation now (after an automatic reset: the new episode's)."""
        if self._raw is None:
            raise RuntimeError("metaworld: reset() first")
        return self._raw

    @property
    def inner(self) -> Any:
        """The MetaWorld env (built on the first reset)."""
        return self._ensure_env()

    def expert_action(self) -> np.ndarray:
        """What MetaWorld's scripted expert for this task does now (float32 [4]; it can exceed [-1, 1])."""
        if self._expert is None:
            policies = importlib.import_module(import_metaworld().__name__ + ".policies")
            self._expert = getattr(policies, expert_class_name(self.task))()
        return np.asarray(self._expert.get_action(self.raw_observation), dtype=np.float32)

    # ------------------------------------------------------------------------------------------ helpers
    def _ensure_env(self) -> Any:
        if self._env is not None:
            return self._env
        os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported: headless rendering
        metaworld = import_metaworld()
        with _BUILD_LOCK:
            benchmark = metaworld.MT1(self.task, seed=MT1_SEED)
        size = {} if self.look == "lerobot" else {"width": self.image_size, "height": self.image_size}
        env = benchmark.train_classes[self.task](render_mode="rgb_array", camera_name=CAMERA, **size)
        env.set_task(benchmark.train_tasks[0])
        if self.look == "fast":
            # Read when the GL context is made, at the first render: no shadow map, no multisampling.
            env.model.vis.quality.shadowsize = 0
            env.model.vis.quality.offsamples = 0
        env.model.cam_pos[_CORNER2_INDEX] = _CORNER2_POSITION
        env.reset()
        env._freeze_rand_vec = False
        env.seeded_rand_vec = True
        self._env = env
        return env

    def _frame(self) -> np.ndarray:
        return np.flip(self._ensure_env().render(), (0, 1)).copy()

    def _observation(self, raw: np.ndarray) -> dict[str, Any]:
        if self.obs_type == "agent_pos":
            return {"agent_pos": raw[:4]}
        return {"pixels": self._frame(), "agent_pos": raw[:4]}
