"""``listed_episodes``: a dataset format whose factory returns a plain list of sample dicts.

Synthetic episodes of a point robot moving toward a goal: the state is its position, the action chunk its next
``action_horizon`` displacements, and the camera frame a blob drawn at the position. Shapes follow the model's
data config (``data.camera_keys``, ``data.state_dim``, ``data.action_dim``, which the run sets).
"""

from __future__ import annotations

from typing import Any

import torch

from embodied_core import BaseDataConfig, TrainingArgs

__all__ = ["build_listed_episodes"]

EPISODE_LENGTH = 20


def _frame(position: torch.Tensor, height: int, width: int) -> torch.Tensor:
    ys = torch.linspace(-1, 1, height)[:, None]
    xs = torch.linspace(-1, 1, width)[None, :]
    blob = torch.exp(-((ys - position[0]) ** 2 + (xs - position[1 % position.numel()]) ** 2) * 20)
    return (blob * 255).to(torch.uint8).expand(3, height, width).contiguous()


def build_listed_episodes(args: TrainingArgs, data_config: BaseDataConfig) -> list[dict[str, Any]]:
    """``--num-samples`` samples (episodes of 20 steps), the same for every call with the same ``--seed``."""
    gen = torch.Generator().manual_seed(args.seed)
    height, width = data_config.image_size
    horizon, dim = data_config.action_horizon, data_config.action_dim
    samples = []
    for episode in range((args.num_samples + EPISODE_LENGTH - 1) // EPISODE_LENGTH):
        goal = torch.rand(data_config.state_dim, generator=gen) * 2 - 1
        path = torch.linspace(0, 1, EPISODE_LENGTH + horizon)[:, None] * goal
        for frame in range(EPISODE_LENGTH):
            if len(samples) == args.num_samples:
                break
            steps = path[frame + 1:frame + 1 + horizon] - path[frame:frame + horizon]
            sample = {key: _frame(path[frame], height, width) for key in data_config.camera_keys}
            sample.update({
                data_config.state_key: path[frame].clone(),
                data_config.action_key: steps[:, :dim].clone(),
                f"{data_config.action_key}_is_pad": torch.arange(horizon) >= EPISODE_LENGTH - frame,
                "task": "reach the goal",
                "index": len(samples), "episode_index": episode, "frame_index": frame,
            })
            samples.append(sample)
    return samples
