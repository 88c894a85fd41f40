"""The synthetic "reach the moving target" task: simulation and rendering (numpy only).

A target disk sits somewhere in a 2-D workspace ``[-1, 1]^2``, drifts slowly, and every 12-24 frames jumps
to a new random place. A point arm (a link from a fixed base to an end-point) chases it: each step's
action is the end-point position commanded for the next frame, a bounded step from the current end-point
toward the target as it is *now*. The state is the current end-point. The target is only visible in the
camera, so a policy must look at the image to act well; with ``num_tasks=2`` a second, green target is
drawn and the task text says which colour to reach, so the language matters too.

Coordinates: x grows to the right, y grows downward (image convention), both in ``[-1, 1]``.
"""

from __future__ import annotations

import attrs
import numpy as np

__all__ = ["TASKS", "Episode", "TaskParams", "expert_command", "render_frames", "simulate_episode"]

TASKS = ("move the arm to the red target", "move the arm to the green target")
"""Task strings; task ``i`` names target ``i``."""

_TARGET_COLOURS = np.array([[220, 40, 40], [40, 190, 60]], dtype=np.float32)
_ARM_COLOUR = np.array([40, 70, 230], dtype=np.float32)
_LINK_COLOUR = np.array([90, 90, 110], dtype=np.float32)
_BASE = np.array([0.0, 0.95])  # arm base: bottom centre of the workspace


@attrs.frozen(kw_only=True)
class TaskParams:
    """Dynamics of the task (the defaults give a policy something easy but non-trivial to learn)."""

    gain: float = 0.35
    """Fraction of the end-point-to-target distance covered per step."""
    max_step: float = 0.15
    """Largest end-point move per step (workspace units)."""
    target_amplitude: float = 0.7
    """Targets stay within ``[-target_amplitude, target_amplitude]^2``."""
    min_hold: int = 12
    """Fewest frames a target stays (drifting slowly) before it jumps to a new place."""
    max_hold: int = 24
    """Most frames a target stays before it jumps."""
    num_tasks: int = 1
    """1: one red target. 2: red and green targets, the task text picks one."""


@attrs.frozen(kw_only=True)
class Episode:
    """One simulated episode: ``length`` frames of positions, state and action (float32)."""

    task_index: int
    targets: np.ndarray
    """[num_tasks, T, 2] target positions (target ``task_index`` is the one to reach)."""
    state: np.ndarray
    """[T, 2] end-point position at each frame."""
    action: np.ndarray
    """[T, 2] commanded end-point position for the next frame."""

    @property
    def length(self) -> int:
        """Number of frames."""
        return int(self.state.shape[0])


def _target_path(rng: np.random.Generator, length: int, fps: float, params: TaskParams) -> np.ndarray:
    """Piecewise drifting target: it appears somewhere, drifts slowly, then jumps to a new place."""
    path = np.empty((length, 2))
    frame = 0
    while frame < length:
        hold = int(rng.integers(params.min_hold, params.max_hold + 1))
        start = rng.uniform(-params.target_amplitude, params.target_amplitude, size=2)
        velocity = rng.normal(0.0, 0.15, size=2) / fps  # workspace units per frame
        steps = np.arange(min(hold, length - frame))[:, None]
        path[frame : frame + len(steps)] = np.clip(start + velocity * steps, -params.target_amplitude,
                                                   params.target_amplitude)
        frame += len(steps)
    return path


def expert_command(arm: np.ndarray, goal: np.ndarray, params: TaskParams) -> np.ndarray:
    """The recorded expert's command: ``gain`` of the way from the end-point ``arm`` to the target ``goal``, at most
    ``max_step`` long, inside the workspace."""
    step = params.gain * (np.asarray(goal, np.float64) - arm)
    norm = float(np.linalg.norm(step))
    if norm > params.max_step:
        step *= params.max_step / norm
    return np.clip(arm + step, -1.0, 1.0)


def simulate_episode(rng: np.random.Generator, *, length: int, fps: float, task_index: int,
                     params: TaskParams) -> Episode:
    """Simulates one episode; everything random comes from ``rng``."""
    targets = np.stack([_target_path(rng, length, fps, params) for _ in range(params.num_tasks)])
    goal = targets[task_index]
    state = np.empty((length, 2))
    action = np.empty((length, 2))
    arm = rng.uniform(-0.8, 0.8, size=2)
    for i in range(length):
        state[i] = arm
        action[i] = expert_command(arm, goal[i], params)
        arm = action[i]
    return Episode(task_index=task_index, targets=targets.astype(np.float32), state=state.astype(np.float32),
                   action=action.astype(np.float32))


def _to_pixels(points: np.ndarray, height: int, width: int) -> np.ndarray:
    """Workspace ``[-1, 1]`` -> pixel centres (x, y)."""
    return np.stack([(points[..., 0] + 1) / 2 * (width - 1), (points[..., 1] + 1) / 2 * (height - 1)], axis=-1)


def _paint_disk(img: np.ndarray, centre: np.ndarray, radius: float, colour: np.ndarray,
                yy: np.ndarray, xx: np.ndarray) -> None:
    # Soft edge (one pixel of anti-aliasing) so sub-pixel motion stays visible after compression.
    dist = np.sqrt((xx - centre[0]) ** 2 + (yy - centre[1]) ** 2)
    alpha = np.clip(radius + 0.5 - dist, 0.0, 1.0)[..., None]
    img *= 1 - alpha
    img += alpha * colour


def _paint_segment(img: np.ndarray, start: np.ndarray, end: np.ndarray, half_width: float, colour: np.ndarray,
                   yy: np.ndarray, xx: np.ndarray) -> None:
    direction = end - start
    length_sq = max(float(direction @ direction), 1e-9)
    proj = np.clip(((xx - start[0]) * direction[0] + (yy - start[1]) * direction[1]) / length_sq, 0.0, 1.0)
    dist = np.sqrt((xx - start[0] - proj * direction[0]) ** 2 + (yy - start[1] - proj * direction[1]) ** 2)
    alpha = np.clip(half_width + 0.5 - dist, 0.0, 1.0)[..., None]
    img *= 1 - alpha
    img += alpha * colour


def render_frames(episode: Episode, *, height: int, width: int, view: str = "front") -> np.ndarray:
    """Renders the episode as uint8 ``[T, H, W, 3]`` frames.

    ``view="front"`` shows the whole workspace; ``view="wrist"`` is a 2x zoom centred on the end-point
    (targets appear when they are near the arm), like a camera mounted on the arm.
    """
    if view not in ("front", "wrist"):
        raise ValueError(f"unknown view {view!r}; valid: front, wrist")
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    scale = min(height, width)
    background = np.empty((height, width, 3), dtype=np.float32)
    background[..., 0] = 200 - 40 * yy / max(height - 1, 1)
    background[..., 1] = 205 - 25 * xx / max(width - 1, 1)
    background[..., 2] = 185
    zoom = 2.0 if view == "wrist" else 1.0
    frames = np.empty((episode.length, height, width, 3), dtype=np.uint8)
    for i in range(episode.length):
        centre = episode.state[i] if view == "wrist" else np.zeros(2, dtype=np.float32)

        def to_view(points: np.ndarray, centre: np.ndarray = centre) -> np.ndarray:
            return _to_pixels((points - centre) * zoom, height, width)

        img = background.copy()
        if view == "front":
            _paint_segment(img, to_view(_BASE), to_view(episode.state[i]), scale * 0.025, _LINK_COLOUR, yy, xx)
        for k in range(episode.targets.shape[0]):
            _paint_disk(img, to_view(episode.targets[k, i]), scale * 0.07 * zoom, _TARGET_COLOURS[k], yy, xx)
        _paint_disk(img, to_view(episode.state[i]), scale * 0.05 * zoom, _ARM_COLOUR, yy, xx)
        frames[i] = np.clip(img + 0.5, 0, 255).astype(np.uint8)
    return frames
