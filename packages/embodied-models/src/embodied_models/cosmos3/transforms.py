"""``make_transforms`` of the Cosmos3 models: the ``cosmos3_droid`` per-sample transform and collator
(:mod:`embodied_models.cosmos3.data`), optional action standardization, and the inverse for sampled actions.

Policy observations (the three cameras, the state, the task; no ``video``) are first made the raw sample of one
frame by the strategy's :meth:`~.data.reader.DroidWindowTransform.observation` (:class:`PolicyObservations`), so
inference runs training's transform; the caption names ``data.action_fps`` (required at inference).

``sample_actions`` returns ``[B, action_chunk_length, max_action_dim]``; ``postprocess_actions`` keeps the first
``data.action_dim`` channels (DROID: 7 joints, then ``1 - gripper``, exactly the strategy's ``action`` feature) and,
with ``model.action_normalization=mean_std``, undoes the standardization. With ``none`` (LoongForge's behaviour)
actions stay in dataset units end to end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from embodied_core.errors import DataError, ObservationError
from embodied_core.model_api import Transforms
from embodied_models.cosmos3.config import Cosmos3ModelConfig
from embodied_models.cosmos3.data.collate import collate_cosmos3
from embodied_models.cosmos3.data.config import Cosmos3DataConfig
from embodied_models.cosmos3.data.reader import DroidWindowTransform
from embodied_models.cosmos3.data.tables import domain_id
from embodied_models.cosmos3.data.transform import make_sample_transform

__all__ = ["ActionPostprocess", "PolicyObservations", "StandardizeActions", "make_transforms"]

_MIN_STD = 1e-6


def _moments(stats: Mapping[str, Any] | None, key: str, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    entry = (stats or {}).get(key)
    if entry is None or "mean" not in entry or "std" not in entry:
        raise DataError(f"model.action_normalization=mean_std needs the mean and std of {key!r}, which the dataset "
                        f"statistics lack (have: {sorted(stats or {})}); set model.action_normalization=none")
    mean = torch.as_tensor(np.asarray(entry["mean"], dtype=np.float32)).reshape(-1)[:width]
    std = torch.as_tensor(np.asarray(entry["std"], dtype=np.float32)).reshape(-1)[:width]
    return mean, std.clamp_min(_MIN_STD)


class StandardizeActions:
    """Wraps the per-sample transform: row 0 (observed state) by the state moments, rows 1.. by the action moments,
    over the first ``raw_action_dim`` channels (picklable)."""

    def __init__(self, inner: Any, state: tuple[torch.Tensor, torch.Tensor],
                 action: tuple[torch.Tensor, torch.Tensor]) -> None:
        self.inner, self.state, self.action = inner, state, action

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        out = self.inner(sample)
        values = out.get("action")
        if values is None:
            return out
        d = min(int(out["raw_action_dim"]), self.action[0].numel())
        values = values.clone()
        values[:1, :d] = (values[:1, :d] - self.state[0][:d]) / self.state[1][:d]
        values[1:, :d] = (values[1:, :d] - self.action[0][:d]) / self.action[1][:d]
        out["action"] = values
        return out


class PolicyObservations:
    """Passes dataset samples through; turns a policy observation into the raw sample of one frame (picklable)."""

    def __init__(self, inner: Any, data_config: Cosmos3DataConfig) -> None:
        self.inner, self.cfg = inner, data_config

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        if "video" in sample:
            return self.inner(sample)
        cfg = self.cfg
        if cfg.action_fps is None:
            raise ObservationError("a Cosmos3 policy names the clip's frame rate in its caption: the checkpoint's "
                                   "data.action_fps is unset (train with data.action_fps=<the dataset's fps>)")
        reader = DroidWindowTransform(camera_keys=tuple(cfg.camera_keys), joint_action_key=cfg.joint_action_key,
                                      gripper_action_key=cfg.gripper_action_key, joint_state_key=cfg.joint_state_key,
                                      gripper_state_key=cfg.gripper_state_key, fps=cfg.action_fps,
                                      domain_id=domain_id(cfg.embodiment), caption_choice=cfg.caption_choice,
                                      state_key=cfg.state_key)
        return self.inner(reader.observation(sample))


class ActionPostprocess:
    """``[B, H, max_action_dim]`` -> ``[B, H, action_dim]`` in dataset units (picklable)."""

    def __init__(self, action_dim: int, moments: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        self.action_dim = int(action_dim)
        self.moments = moments

    def __call__(self, actions: torch.Tensor) -> torch.Tensor:
        out = actions[..., : self.action_dim]
        if self.moments is not None:
            mean, std = (m.to(out.device, out.dtype) for m in self.moments)
            out = out * std + mean
        return out


def make_transforms(model_config: Cosmos3ModelConfig, data_config: Cosmos3DataConfig, *,
                    stats: Mapping[str, Any] | None) -> Transforms:
    """The Cosmos3 data pipeline; ``stats`` are read only with ``model.action_normalization=mean_std``."""
    sample: Any = make_sample_transform(data_config, max_action_dim=model_config.max_action_dim,
                                        temporal_compression=model_config.vae_temporal_compression)
    width = data_config.action_dim or model_config.max_action_dim
    moments = None
    if model_config.action_normalization == "mean_std":
        moments = _moments(stats, data_config.action_key, width)
        sample = StandardizeActions(sample, _moments(stats, data_config.state_key, width), moments)
    return Transforms(sample_transform=PolicyObservations(sample, data_config), collate_fn=collate_cosmos3,
                      postprocess_actions=ActionPostprocess(width, moments))
