"""``pusht``: gym-pusht's PushT (push a T-shaped block onto a target; 2-D, pymunk physics, no GL needed).

Install with ``pip install 'embodied-eval[pusht]'``. Observations: the top-down frame (rendered at the policy's
image size) and the agent's position in pixels (``[2]``, 0..512); the action is the agent's target position,
as in LeRobot's ``lerobot/pusht`` dataset (camera ``observation.image``). Success: gym-pusht's own (the block
covers more than 95% of the target); the reward is its coverage-based one.
"""

from __future__ import annotations

from embodied_core.protocols import PolicyMetadata
from embodied_eval.envs.base import EnvLayout, EvalEnv, distribution_versions

__all__ = ["make_env"]

TASK = "Push the T-shaped block onto the T-shaped target."
"""The task text of LeRobot's pusht dataset."""


def make_env(metadata: PolicyMetadata | None, *, max_steps: int | None = None) -> EvalEnv:
    """gym-pusht's ``PushT-v0`` with ``obs_type="pixels_agent_pos"`` (300 steps at 10 Hz by default)."""
    import gym_pusht  # noqa: F401  (registers gym_pusht/PushT-v0)
    import gymnasium as gym

    layout = EnvLayout(camera_keys=("observation.image",), image_shape=(96, 96, 3), state_dim=2, action_dim=2,
                       fps=10.0, task=TASK)
    height, width, _ = (metadata or layout.as_metadata(model_name="none")).image_shape
    max_steps = max_steps or 300
    env = gym.make("gym_pusht/PushT-v0", obs_type="pixels_agent_pos", render_mode="rgb_array",
                   observation_width=width, observation_height=height, max_episode_steps=max_steps)
    return EvalEnv(env, name="pusht", layout=layout, metadata=metadata, cameras=("pixels",), max_steps=max_steps,
                   versions=distribution_versions("gym-pusht", "gymnasium", "pymunk"))
