"""``default`` strategy: the model's DataConfig decides the offsets, keys keep their LeRobot names.

- ``action_key``: ``action_horizon`` offsets ``0, 1/fps, ...`` -> ``[H, D]`` with ``<action_key>_is_pad``;
- ``state_key``: ``state_history`` frames ending now -> ``[T, D]`` with a pad mask, or ``[D]`` when 1;
- each of ``camera_keys``: ``image_history`` frames -> ``[T, C, H, W]`` uint8 with a pad mask, or ``[C, H, W]``.
These are the shapes ``dummy_datasets`` produces, so a model sees the same structure from both.
"""

from __future__ import annotations

from embodied_core.config.model_config import BaseDataConfig
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.strategies.base import DatasetPlan, DatasetStrategy, history_offsets, require_feature

__all__ = ["DefaultStrategy", "default_offsets"]


def default_offsets(meta: LeRobotMeta, data_config: BaseDataConfig, *, state_keys: list[str],
                    action_keys: list[str], camera_keys: list[str]) -> dict[str, list[float]]:
    """Delta timestamps from ``action_horizon``, ``state_history`` and ``image_history`` for the given keys."""
    fps = meta.fps
    deltas: dict[str, list[float]] = {}
    for key in action_keys:
        deltas[key] = [i / fps for i in range(data_config.action_horizon)]
    if data_config.state_history > 1:
        for key in state_keys:
            deltas[key] = history_offsets(data_config.state_history, fps)
    if data_config.image_history > 1:
        for key in camera_keys:
            deltas[key] = history_offsets(data_config.image_history, fps)
    return deltas


class DefaultStrategy(DatasetStrategy):
    """Reads ``state_key``, ``action_key`` and ``camera_keys`` of the DataConfig with its horizons."""

    name = "default"

    def plan(self, meta: LeRobotMeta, data_config: BaseDataConfig) -> DatasetPlan:
        require_feature(meta, data_config.state_key, field="data.state_key")
        require_feature(meta, data_config.action_key, field="data.action_key")
        for cam in data_config.camera_keys:
            require_feature(meta, cam, field="data.camera_keys", cameras=True)
        cameras = list(data_config.camera_keys)
        deltas = default_offsets(meta, data_config, state_keys=[data_config.state_key],
                                 action_keys=[data_config.action_key], camera_keys=cameras)
        return DatasetPlan(delta_timestamps=deltas, camera_keys=cameras)
