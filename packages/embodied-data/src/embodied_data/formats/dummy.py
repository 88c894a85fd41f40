"""``dummy_datasets``: deterministic random samples with the LeRobot keys of DESIGN 5.

Shapes come from the model's DataConfig: cameras ``[T, C, H, W]`` uint8 (``[C, H, W]`` when
``image_history == 1``), ``observation.state`` ``[T, D]`` (``[D]`` when ``state_history == 1``),
``action`` ``[H, D]`` with ``action_is_pad``. Sample ``i`` is the same on every call and every process.

Models whose samples carry more than the LeRobot keys (precomputed latents, text embeddings) declare them
with a DataConfig method ``dummy_features() -> {key: (shape, dtype)}``; those keys get random float values
(``randn``), zeros for integer dtypes, ``False`` for ``bool``.

Data fields the config leaves unset (``camera_keys``, ``state_dim``, ``action_dim``) are generated as one camera
``observation.images.front`` and 8-D state and action (:func:`infer_dummy_features`, the format's ``infer``).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from embodied_core.config.infer import FeatureMetadata, fill_unset
from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.protocols import DatasetFeature

__all__ = ["FPS", "DummyDataset", "build_dummy_dataset", "infer_dummy_features"]

_TASKS = ("pick up the cube", "push the block to the goal")

FPS = 30.0
"""Frame rate of the synthetic episodes (``timestamp = frame_index / FPS``)."""

GENERATED_CAMERA = "observation.images.front"
"""The camera generated when ``data.camera_keys`` is unset."""
GENERATED_DIM = 8
"""Width of the state and action vectors generated when ``data.state_dim`` / ``data.action_dim`` are unset."""


def infer_dummy_features(args: TrainingArgs | None, data_config: BaseDataConfig) -> FeatureMetadata:
    """``DatasetFormatSpec.infer`` of ``dummy_datasets``: what it generates for unset fields.

    Not binding: a generated dataset follows every field that is set, so nothing can disagree.
    """
    height, width = data_config.image_size
    features = {
        GENERATED_CAMERA: DatasetFeature(key=GENERATED_CAMERA, dtype="image", shape=(height, width, 3)),
        data_config.state_key: DatasetFeature(key=data_config.state_key, dtype="float32", shape=(GENERATED_DIM,)),
        data_config.action_key: DatasetFeature(key=data_config.action_key, dtype="float32", shape=(GENERATED_DIM,)),
    }
    return FeatureMetadata(features=features, source="dummy_datasets (generated)", binding=False)


class DummyDataset(Dataset):
    """``num_samples`` random samples; the sample at ``index`` is a pure function of ``(seed, index)``.

    A generated dataset: ``root`` is None, ``episodes`` None (every synthetic episode), ``fps`` 30.
    """

    fps: float = FPS
    root: Path | None = None
    episodes: list[int] | None = None

    def __init__(self, data_config: BaseDataConfig, *, num_samples: int, seed: int = 0, episode_length: int = 50):
        self.config = fill_unset(data_config, infer_dummy_features(None, data_config))[0]
        self.num_samples = num_samples
        self.seed = seed
        self.episode_length = episode_length

    def __len__(self) -> int:
        return self.num_samples

    @cached_property
    def features(self) -> dict[str, DatasetFeature]:
        """The keys the samples carry with their per-frame shapes (cameras ``[H, W, 3]`` as LeRobot declares)."""
        cfg = self.config
        height, width = cfg.image_size
        features = {key: DatasetFeature(key=key, dtype="image", shape=(height, width, 3)) for key in cfg.camera_keys}
        features[cfg.state_key] = DatasetFeature(key=cfg.state_key, dtype="float32", shape=(cfg.state_dim,))
        features[cfg.action_key] = DatasetFeature(key=cfg.action_key, dtype="float32", shape=(cfg.action_dim,))
        for key, (shape, dtype) in self._extra_features().items():
            features[key] = DatasetFeature(key=key, dtype=str(dtype).removeprefix("torch."), shape=tuple(shape))
        for key in ("index", "episode_index", "frame_index"):
            features[key] = DatasetFeature(key=key, dtype="int64", shape=(1,))
        features["timestamp"] = DatasetFeature(key="timestamp", dtype="float32", shape=(1,))
        return features

    def _extra_features(self) -> dict[str, tuple[Any, Any]]:
        extra = getattr(self.config, "dummy_features", None)
        return dict(extra()) if callable(extra) else {}

    @cached_property
    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        """Stats of the state and action values, computed from up to 1024 evenly spaced samples (all of them
        when the dataset is that small), so models that normalize with dataset stats run on dummy data."""
        from embodied_data.stats import compute_feature_stats

        cfg = self.config
        positions = np.unique(np.linspace(0, self.num_samples - 1, min(self.num_samples, 1024)).astype(int))
        values: dict[str, list[np.ndarray]] = {cfg.state_key: [], cfg.action_key: []}
        for i in positions:
            sample = self[int(i)]
            for key, parts in values.items():
                parts.append(sample[key].reshape(-1, sample[key].shape[-1]).double().numpy())
        return {key: compute_feature_stats(np.concatenate(parts)) for key, parts in values.items()}

    def episode_ranges(self) -> list[tuple[int, int]]:
        """``(start, stop)`` index range of each synthetic episode (read by the streaming loader)."""
        return [(start, min(start + self.episode_length, self.num_samples))
                for start in range(0, self.num_samples, self.episode_length)]

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.num_samples:
            raise IndexError(f"index {index} out of range for {self.num_samples} samples")
        cfg = self.config
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        height, width = cfg.image_size
        episode, frame = divmod(index, self.episode_length)
        sample: dict[str, Any] = {}
        for key in cfg.camera_keys:
            shape = (cfg.image_history, 3, height, width) if cfg.image_history > 1 else (3, height, width)
            sample[key] = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
            if cfg.image_history > 1:
                sample[f"{key}_is_pad"] = torch.zeros(cfg.image_history, dtype=torch.bool)
        state_shape = (cfg.state_history, cfg.state_dim) if cfg.state_history > 1 else (cfg.state_dim,)
        sample[cfg.state_key] = torch.randn(state_shape, generator=gen)
        if cfg.state_history > 1:
            sample[f"{cfg.state_key}_is_pad"] = torch.zeros(cfg.state_history, dtype=torch.bool)
        sample[cfg.action_key] = torch.randn((cfg.action_horizon, cfg.action_dim), generator=gen)
        sample[f"{cfg.action_key}_is_pad"] = torch.zeros(cfg.action_horizon, dtype=torch.bool)
        for key, (shape, dtype) in self._extra_features().items():
            torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
            if torch_dtype.is_floating_point:
                sample[key] = torch.randn(tuple(shape), generator=gen).to(torch_dtype)
            else:
                sample[key] = torch.zeros(tuple(shape), dtype=torch_dtype)
        sample["task"] = _TASKS[episode % len(_TASKS)]
        sample["index"] = torch.tensor(index)
        sample["episode_index"] = torch.tensor(episode)
        sample["frame_index"] = torch.tensor(frame)
        sample["timestamp"] = torch.tensor(frame / FPS, dtype=torch.float32)
        return sample


def build_dummy_dataset(args: TrainingArgs, data_config: BaseDataConfig) -> DummyDataset:
    """Factory of ``dummy_datasets`` (reads ``--num-samples`` and ``--seed``)."""
    return DummyDataset(data_config, num_samples=args.num_samples, seed=args.seed)
