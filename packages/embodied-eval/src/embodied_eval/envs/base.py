"""What ``embodied eval`` asks of an environment plugin (group ``embodied.envs``), and the adapter for gymnasium
environments whose observations look like gym-pusht's and gym-aloha's.

An env plugin's factory is ``make_env(metadata, *, max_steps=None, **options) -> EvalEnv``: ``metadata`` is the
policy's :class:`~embodied_core.protocols.PolicyMetadata` (the env renders the cameras and size the policy reads),
or None for a baseline without a checkpoint (the env then uses its own layout, :attr:`EvalEnv.layout`). Its
options are either keyword arguments (``--env-option KEY=VALUE``) or, when its ``PluginSpec`` declares an
``options`` attrs class, one structured instance passed as ``options=`` (each field is then also a flag of
``embodied eval`` and ``embodied data collect``: ``task`` -> ``--task``).

What an env declares beyond observations (the evaluator and ``embodied data collect`` stay generic):

- :attr:`EvalEnv.tasks` and :attr:`EvalEnv.task_groups`: the tasks an episode can be started in (the evaluator
  runs ``--episodes`` per task and reports per task and per group);
- :attr:`EvalEnv.action_semantics` and :meth:`EvalEnv.hold_action_for`: what the ``hold`` baseline sends;
- :attr:`EvalEnv.has_expert` and :meth:`EvalEnv.expert_action`: a scripted expert to record demonstrations with.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata as importlib_metadata
from typing import Any, ClassVar

import attrs
import numpy as np

from embodied_core.errors import UsageError
from embodied_core.protocols import PolicyMetadata

__all__ = ["ACTION_SEMANTICS", "EnvLayout", "EvalEnv", "Step", "distribution_versions", "match_cameras"]

ACTION_SEMANTICS = ("absolute", "delta")
"""``absolute``: an action is a target in the state's layout (holding still = sending the state);
``delta``: an action is a motion (holding still = no motion, see :meth:`EvalEnv.hold_action_for`)."""


@attrs.frozen(kw_only=True)
class EnvLayout:
    """An environment's own observation/action layout (what a policy for it reads and writes)."""

    camera_keys: tuple[str, ...]
    image_shape: tuple[int, int, int]
    state_dim: int
    action_dim: int
    fps: float
    task: str
    state_names: tuple[str, ...] | None = None
    """Names of the state values (recorded in a collected dataset's info.json), or None."""
    action_names: tuple[str, ...] | None = None
    """Names of the action values, or None."""

    def as_metadata(self, *, model_name: str, checkpoint: str = "") -> PolicyMetadata:
        """A :class:`PolicyMetadata` for a policy made for this layout (the baselines)."""
        return PolicyMetadata(model_name=model_name, plugin_version="", checkpoint=checkpoint, step=None,
                              camera_keys=self.camera_keys, image_shape=self.image_shape,
                              state_key="observation.state", state_dim=self.state_dim, state_names=None,
                              action_key="action", action_dim=self.action_dim, action_names=None, action_horizon=1,
                              fps=self.fps, needs_task=False, device="cpu")


@attrs.frozen
class Step:
    """One environment step as the evaluator sees it."""

    observation: dict[str, Any]
    reward: float
    done: bool
    success: bool


def distribution_versions(*names: str) -> dict[str, str]:
    """``{distribution: version}`` of the installed ones among ``names``."""
    out = {}
    for name in names:
        try:
            out[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return out


def match_cameras(policy_keys: tuple[str, ...], env_cameras: tuple[str, ...], *, env: str) -> dict[str, str]:
    """``{policy camera key: env camera name}``: by the key's last part (``observation.images.top`` -> ``top``),
    or the only camera to the only key. Raises a UsageError naming both sides when they do not fit."""
    if len(policy_keys) == 1 and len(env_cameras) == 1:
        return {policy_keys[0]: env_cameras[0]}
    out: dict[str, str] = {}
    for key in policy_keys:
        name = key.rsplit(".", 1)[-1]
        if name not in env_cameras:
            raise UsageError(f"{env}: the policy reads camera {key!r}, which this environment does not have; "
                             f"its cameras: {', '.join(env_cameras)} (keys observation.images.<camera>)")
        out[key] = name
    return out


def _resize(frame: np.ndarray, height: int, width: int) -> np.ndarray:
    if frame.shape[:2] == (height, width):
        return frame
    from PIL import Image

    return np.asarray(Image.fromarray(frame).resize((width, height), Image.Resampling.BILINEAR))


class EvalEnv:
    """A gymnasium environment seen through a policy's keys.

    The wrapped env's observations are ``{"pixels": frame or {camera: frame}, "agent_pos": state}`` and its
    ``info`` holds ``is_success`` (gym-pusht, gym-aloha, synth_reach). Frames are resized to the policy's
    ``image_shape`` when the env renders another size.

    Args:
        env: the gymnasium environment.
        name: the plugin name (``pusht``).
        layout: the env's own layout (used when ``metadata`` is None).
        metadata: the policy's metadata, or None.
        cameras: the env's camera names (``("top",)``); a single unnamed ``pixels`` frame is one camera.
        max_steps: the default episode length (``--max-steps`` overrides it).
        versions: distribution versions recorded in eval.json.
    """

    action_semantics: ClassVar[str] = "absolute"
    """One of :data:`ACTION_SEMANTICS`; gym-pusht, gym-aloha and synth_reach take absolute position targets."""

    def __init__(self, env: Any, *, name: str, layout: EnvLayout, metadata: PolicyMetadata | None,
                 cameras: tuple[str, ...], max_steps: int, versions: Mapping[str, str]) -> None:
        self.env = env
        self.name = name
        self.layout = layout
        self.metadata = metadata or layout.as_metadata(model_name="none")
        self.max_steps = max_steps
        self.versions = dict(versions)
        self._cameras = match_cameras(self.metadata.camera_keys, cameras, env=name)
        self._check_dims()
        self._task = layout.task
        self._state = np.zeros(layout.state_dim, np.float32)
        self._frames: dict[str, np.ndarray] = {}
        self._video_camera = cameras[0]

    def _check_dims(self) -> None:
        meta, layout = self.metadata, self.layout
        problems = []
        if meta.state_dim != layout.state_dim:
            problems.append(f"state has {layout.state_dim} dims here, the policy reads {meta.state_dim}")
        if meta.action_dim != layout.action_dim:
            problems.append(f"actions have {layout.action_dim} dims here, the policy writes {meta.action_dim}")
        if meta.image_shape[2] != 3:
            problems.append(f"frames are RGB here, the policy reads {meta.image_shape[2]} channels")
        if problems:
            raise UsageError(f"{self.name} does not fit the policy {meta.model_name} ({meta.checkpoint}): "
                             + "; ".join(problems))

    @property
    def tasks(self) -> tuple[str, ...]:
        """Tasks :meth:`reset` can start an episode in; empty: the env's one task (``reset(seed)`` only)."""
        return ()

    @property
    def task_groups(self) -> Mapping[str, tuple[str, ...]]:
        """``{group: tasks}`` the evaluator also reports (lerobot's difficulty groups); empty: none."""
        return {}

    @property
    def task_text(self) -> str:
        """The instruction of the current episode (what a language-conditioned policy reads as ``task``)."""
        return self._task

    def describe(self) -> dict[str, Any]:
        """The env's settings recorded in eval.json and a collected dataset (rendering, tasks); JSON-ready."""
        return {}

    def reset(self, seed: int, *, task: str | None = None) -> dict[str, Any]:
        """Starts an episode from ``seed`` (in ``task``, one of :attr:`tasks`, when the env has several);
        returns the observation in the policy's keys."""
        if task is not None:
            raise UsageError(f"{self.name} has one task; it cannot start an episode in {task!r}")
        raw, info = self.env.reset(seed=seed)
        self._task = str(info.get("task", self.layout.task))
        return self._observation(raw)

    def step(self, action: np.ndarray) -> Step:
        """Applies one action row ``[action_dim]`` (dataset units)."""
        raw, reward, terminated, truncated, info = self.env.step(np.asarray(action, dtype=np.float32))
        success = bool(info.get("is_success", False))
        return Step(self._observation(raw), float(reward), bool(terminated or truncated or success), success)

    def hold_action(self) -> np.ndarray:
        """An action that keeps the robot where it is now (:meth:`hold_action_for` of the current state)."""
        return self.hold_action_for(self._state)

    def hold_action_for(self, state: np.ndarray) -> np.ndarray:
        """The action that keeps a robot in ``state`` where it is; uses no simulator state, so the ``hold``
        baseline can call it with observed states. Absolute control: the state itself."""
        state = np.asarray(state, dtype=np.float32).reshape(-1)
        if state.shape != (self.layout.action_dim,):
            raise UsageError(f"{self.name}: holding still means commanding the current state, but state has "
                             f"{state.size} dims and actions {self.layout.action_dim}")
        return state.copy()

    @property
    def has_expert(self) -> bool:
        """Whether :meth:`expert_action` works (a scripted expert ``embodied data collect`` can record): the
        wrapped env offers ``expert_action()``."""
        return callable(getattr(self.env, "expert_action", None))

    def expert_action(self) -> np.ndarray:
        """The scripted expert's action for the current state, in dataset units (may exceed the action
        space: the recorder clips it)."""
        if not self.has_expert:
            raise UsageError(f"{self.name} has no scripted expert to record (`embodied data collect` needs one)")
        return np.asarray(self.env.expert_action(), dtype=np.float32).reshape(-1)

    @property
    def action_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(low, high)`` of the env's action space (what recorded actions are clipped to), or None."""
        space = getattr(self.env, "action_space", None)
        if space is None or not hasattr(space, "low"):
            return None
        return np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)

    def render(self) -> np.ndarray:
        """A uint8 HxWx3 picture of the scene for videos."""
        return np.asarray(self.env.render())

    def video_frame(self) -> np.ndarray:
        """The frame for a video of the current step: the last observation's frame of the env's first camera
        (at the env's render size, before any resize), so a video costs no second render."""
        frame = self._frames.get(self._video_camera)
        return frame if frame is not None else self.render()

    def close(self) -> None:
        """Releases the simulator."""
        self.env.close()

    def _observation(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        pixels = raw["pixels"]
        height, width, _ = self.metadata.image_shape
        out: dict[str, Any] = {}
        self._frames = {}
        for key, camera in self._cameras.items():
            frame = np.ascontiguousarray(pixels[camera] if isinstance(pixels, Mapping) else pixels, dtype=np.uint8)
            self._frames[camera] = frame
            out[key] = _resize(frame, height, width)
        self._state = np.asarray(raw["agent_pos"], dtype=np.float32)
        out[self.metadata.state_key] = self._state.copy()
        if self.metadata.needs_task:
            out["task"] = self._task
        return out
