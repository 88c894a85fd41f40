"""``aloha_insertion`` / ``aloha_transfer_cube``: gym-aloha's bimanual ALOHA tasks (MuJoCo + dm_control).

Install with ``pip install 'embodied-eval[aloha]'``. Rendering needs an OpenGL backend without a display:
``MUJOCO_GL=egl`` (the default set here when unset) or ``MUJOCO_GL=osmesa`` after ``apt-get install
libosmesa6``. Observations: the ``top`` camera (gym-aloha renders it at 480 x 640; frames are resized to the
policy's image size) and the 14 joint positions; the action is 14 joint targets, as in LeRobot's
``aloha_sim_*`` datasets (camera ``observation.images.top``). Success: gym-aloha's (the task's full reward, 4).
"""

from __future__ import annotations

import os

from embodied_core.protocols import PolicyMetadata
from embodied_eval.envs.base import EnvLayout, EvalEnv, distribution_versions

__all__ = ["make_insertion", "make_transfer_cube"]

_TASKS = {
    "insertion": ("gym_aloha/AlohaInsertion-v0", "Insert the peg into the socket."),
    "transfer_cube": ("gym_aloha/AlohaTransferCube-v0",
                      "Pick up the cube with the right arm and transfer it to the left arm."),
}


def _make(task: str, metadata: PolicyMetadata | None, max_steps: int | None) -> EvalEnv:
    os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported: headless rendering
    import gym_aloha  # noqa: F401  (registers the gym_aloha/* ids)
    import gymnasium as gym

    env_id, text = _TASKS[task]
    layout = EnvLayout(camera_keys=("observation.images.top",), image_shape=(480, 640, 3), state_dim=14,
                       action_dim=14, fps=50.0, task=text)
    max_steps = max_steps or 400
    env = gym.make(env_id, obs_type="pixels_agent_pos", render_mode="rgb_array", max_episode_steps=max_steps)
    return EvalEnv(env, name=f"aloha_{task}", layout=layout, metadata=metadata, cameras=("top",),
                   max_steps=max_steps, versions=distribution_versions("gym-aloha", "gymnasium", "mujoco",
                                                                       "dm-control"))


def make_insertion(metadata: PolicyMetadata | None, *, max_steps: int | None = None) -> EvalEnv:
    """``aloha_insertion``: both arms pick up a peg and a socket and insert one into the other."""
    return _make("insertion", metadata, max_steps)


def make_transfer_cube(metadata: PolicyMetadata | None, *, max_steps: int | None = None) -> EvalEnv:
    """``aloha_transfer_cube``: the right arm picks up a cube and hands it to the left arm."""
    return _make("transfer_cube", metadata, max_steps)
