"""What ``embodied eval`` asks of an environment plugin (group ``embodied.envs``), and the adapter for gymnasium
environments whose observations look like gym-pusht's and gym-aloha's.

An env plugin's factory is ``make_env(metadata, **options) -> EvalEnv``: ``metadata`` is the policy's
:class:`~embodied_core.protocols.PolicyMetadata` (the env renders the cameras and size the policy reads), or
None for a baseline without a checkpoint (the env then uses its own layout, :attr:`EvalEnv.layout`).
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata as importlib_metadata
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import UsageError
from embodied_core.protocols import PolicyMetadata

__all__ = ["EnvLayout", "EvalEnv", "Step", "distribution_versions", "match_cameras"]


@attrs.frozen(kw_only=True)
class EnvLayout:
    """An environment's own observation/action layout (what a policy for it reads and writes)."""

    camera_keys: tuple[str, ...]
    image_shape: tuple[int, int, int]
    state_dim: int
    action_dim: int
    fps: float
    task: str

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

    def reset(self, seed: int) -> dict[str, Any]:
        """Starts an episode from ``seed``; returns the observation in the policy's keys."""
        raw, info = self.env.reset(seed=seed)
        self._task = str(info.get("task", self.layout.task))
        return self._observation(raw)

    def step(self, action: np.ndarray) -> Step:
        """Applies one action row ``[action_dim]`` (dataset units)."""
        raw, reward, terminated, truncated, info = self.env.step(np.asarray(action, dtype=np.float32))
        success = bool(info.get("is_success", False))
        return Step(self._observation(raw), float(reward), bool(terminated or truncated or success), success)

    def hold_action(self) -> np.ndarray:
        """An action that keeps the robot where it is: the current state (absolute position control)."""
        return self._state.copy()

    def render(self) -> np.ndarray:
        """A uint8 HxWx3 picture of the scene for videos."""
        return np.asarray(self.env.render())

    def close(self) -> None:
        """Releases the simulator."""
        self.env.close()

    def _observation(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        pixels = raw["pixels"]
        height, width, _ = self.metadata.image_shape
        out: dict[str, Any] = {}
        for key, camera in self._cameras.items():
            frame = pixels[camera] if isinstance(pixels, Mapping) else pixels
            out[key] = _resize(np.ascontiguousarray(frame, dtype=np.uint8), height, width)
        self._state = np.asarray(raw["agent_pos"], dtype=np.float32)
        out[self.metadata.state_key] = self._state.copy()
        if self.metadata.needs_task:
            out["task"] = self._task
        return out
