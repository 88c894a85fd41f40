"""The per-sample transform of the ``dreamzero`` strategy: LeRobot sample -> DreamZero training sample.

Input: the LeRobot reader's sample for one anchor (cameras ``[T, C, H, W]`` uint8, the state / action columns at
the rows of :mod:`.index`, the annotation columns, ``flat_index`` ...). Output (DreamZero's ``DreamTransform``
fields, torch tensors)::

    state [S, max_state_dim] f32, state_mask bool   S = chunks x state_horizon (q01/q99 normalized, clamped)
    action [A, max_action_dim] f32, action_mask bool A = chunks x action_horizon (DROID: chunks x 24)
    lapa_action, lapa_action_mask                    zeros of the action's shapes
    segmentation_target [2] f64, segmentation_target_mask [1] f64, has_real_action, has_lapa_action,
    is_cotrain_instance (bool scalars)
    images [T, H', W', 3] uint8                      views cropped, resized and laid out (embodiments.py)
    text (raw instruction), text_negative (Wan's negative prompt), embodiment_id (int)
    video_latents / first_frame_latents / prompt_embs  from the precomputed cache, when configured

Normalization: ``2 (x - q01) / (q99 - q01) - 1`` clamped to [-1, 1]; dimensions with q01 == q99 keep their raw
value (then clamped), as DreamZero. Relative actions: each chunk's actions minus the state of the chunk's anchor
(before normalization). Randomness (crop, jitter, DROID's choice among its three instructions): with
``use_sample_transform_seed`` from ``sample_transform_seed + flat_index`` (``+ mixture_index`` for a sample of
LoongForge's mixture, ``data/mixture.py``; private generators: the global RNGs are not touched); otherwise from the
global RNGs, which the loader seeds per sample.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch

from embodied_core.errors import DataError
from embodied_core.protocols import DatasetFeature
from embodied_models.dreamzero.data.cache import CacheReader
from embodied_models.dreamzero.data.embodiments import NEGATIVE_PROMPT, compose_views
from embodied_models.dreamzero.data.video import ColorJitter, process_views

__all__ = ["DreamZeroSampleTransform", "LanguageSource", "Part", "normalize_q99"]

Sample = dict[str, Any]


@attrs.frozen(kw_only=True)
class Part:
    """One state or action part: ``column[..., start:end]`` normalized with ``q01`` / ``q99``."""

    name: str
    column: str
    start: int
    end: int
    q01: np.ndarray
    q99: np.ndarray
    relative: bool = False


@attrs.frozen(kw_only=True)
class LanguageSource:
    """One annotation: a string column, or a task-index column resolved through the tasks table."""

    name: str
    column: str
    tasks: Mapping[int, str] | None = None

    def read(self, sample: Sample) -> str:
        """The instruction of the sample's anchor row."""
        value = sample[self.column]
        if self.tasks is None:
            return str(value[0] if isinstance(value, list) else value)
        index = int(value.reshape(-1)[0]) if isinstance(value, torch.Tensor) else int(value)
        try:
            return self.tasks[index]
        except KeyError:
            raise DataError(f"annotation.{self.name}: column {self.column!r} holds task index {index}, which is not "
                            "in meta/tasks.jsonl") from None


def normalize_q99(x: torch.Tensor, q01: torch.Tensor, q99: torch.Tensor) -> torch.Tensor:
    """DreamZero's q99 normalization with clamp (q01 == q99 dimensions pass through, then the clamp)."""
    q01, q99 = q01.to(x.dtype), q99.to(x.dtype)
    mask = q01 != q99
    out = torch.zeros_like(x)
    out[..., mask] = (x[..., mask] - q01[mask]) / (q99[mask] - q01[mask])
    out[..., mask] = 2 * out[..., mask] - 1
    out[..., ~mask] = x[..., ~mask]
    return torch.clamp(out, -1, 1)


def _pad(values: torch.Tensor, width: int, *, what: str, truncate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    rows, dims = values.shape
    if dims > width:
        if not truncate:
            raise DataError(f"{what} has {dims} dimensions, more than data.max_{what}_dim={width}; raise it")
        values, dims = values[:, :width], width
    out = torch.zeros((rows, width), dtype=values.dtype)
    out[:, :dims] = values
    mask = torch.zeros((rows, width), dtype=torch.bool)
    mask[:, :dims] = True
    return out, mask


@attrs.define(kw_only=True)
class DreamZeroSampleTransform:
    """LeRobot sample -> DreamZero sample (module docstring). Picklable.

    Attributes:
        embodiment_id, layout: the embodiment's projector id and view layout.
        cameras: dataset camera keys in view order.
        state, action: the parts, in concatenation order.
        language: the annotations; training on oxe_droid picks one of several at random.
        random_language: pick among ``language`` at random (DROID in training) instead of the first.
        chunk_length: actions per chunk for relative actions (and the action-row multiple).
        state_horizon: state rows per chunk.
        image_size: (height, width) of each view after the resize.
        crop_scale, jitter: crop scale; colour jitter (None: off).
        max_state_dim, max_action_dim: padding widths.
        training: random crop / jitter / language choice and the action fields; eval: centre crop, no actions.
        use_sample_transform_seed, sample_transform_seed: per-sample seeding (module docstring).
        cache: reader of the precomputed features (None: none attached).
    """

    embodiment_id: int
    layout: str
    cameras: tuple[str, ...]
    state: tuple[Part, ...]
    action: tuple[Part, ...]
    language: tuple[LanguageSource, ...]
    random_language: bool
    chunk_length: int
    state_horizon: int
    image_size: tuple[int, int]
    crop_scale: float
    jitter: ColorJitter | None
    max_state_dim: int
    max_action_dim: int
    training: bool = True
    use_sample_transform_seed: bool = False
    sample_transform_seed: int = 0
    cache: CacheReader | None = None

    def __call__(self, sample: Sample) -> Sample:
        flat_index = int(sample.get("flat_index", sample.get("index", 0)))
        if self.use_sample_transform_seed:
            # a mixture draw (data.use_mixture_dataset) seeds with its own index, as LoongForge's mixture does
            seed = self.sample_transform_seed + int(sample.get("mixture_index", flat_index))
            generator: torch.Generator | None = torch.Generator().manual_seed(seed)
            chooser: Any = random.Random(seed)
        else:
            generator, chooser = None, random
        views, _ = process_views([sample[cam] for cam in self.cameras], size=self.image_size,
                                 crop_scale=self.crop_scale, training=self.training, jitter=self.jitter,
                                 generator=generator)
        out: Sample = {}
        state = self._state(sample)
        out["state"], out["state_mask"] = _pad(state, self.max_state_dim, what="state", truncate=True)
        if self.training:
            out["segmentation_target"] = torch.zeros(2, dtype=torch.float64)
            out["segmentation_target_mask"] = torch.zeros(1, dtype=torch.float64)
            out["has_real_action"] = torch.tensor(True)
            action = self._action(sample)
            out["action"], out["action_mask"] = _pad(action, self.max_action_dim, what="action", truncate=False)
            out["lapa_action"] = torch.zeros_like(out["action"])
            out["lapa_action_mask"] = torch.zeros_like(out["action_mask"])
        out["text_negative"] = NEGATIVE_PROMPT
        out["images"] = compose_views(views, self.layout)
        out["text"] = self._instruction(sample, chooser)
        out["embodiment_id"] = self.embodiment_id
        out["has_lapa_action"] = torch.tensor(False)
        out["is_cotrain_instance"] = torch.tensor(False)
        if self.cache is not None:
            out.update(self.cache.load(flat_index, trajectory_id=int(sample.get("trajectory_id", 0)),
                                       base_index=int(sample.get("base_index", 0)),
                                       frames=int(out["images"].shape[0])))
        return out

    # ---------------------------------------------------------------- feature map (DatasetPlan.feature_map)
    def map_stats(self, stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
        """The stored stats plus ``state`` / ``action``: the q01 / q99 the samples were normalized with (the parts
        concatenated; relative statistics for relative parts), what a policy needs to undo the normalization."""
        out = {key: dict(entry) for key, entry in stats.items()}
        for key, parts in (("state", self.state), ("action", self.action)):
            out[key] = {"q01": np.concatenate([np.asarray(p.q01, dtype=np.float64).reshape(-1) for p in parts]),
                        "q99": np.concatenate([np.asarray(p.q99, dtype=np.float64).reshape(-1) for p in parts])}
        return out

    def map_features(self, features: Mapping[str, DatasetFeature]) -> dict[str, DatasetFeature]:
        """The stored features plus ``state`` / ``action`` with the embodiment's real (unpadded) widths."""
        out = dict(features)
        for key, parts in (("state", self.state), ("action", self.action)):
            out[key] = DatasetFeature(key=key, dtype="float32", shape=(sum(p.end - p.start for p in parts),),
                                      names=[f"{p.name}_{i}" for p in parts for i in range(p.end - p.start)])
        return out

    # ---------------------------------------------------------------- parts
    def _raw(self, sample: Sample, part: Part) -> torch.Tensor:
        values = sample[part.column]
        values = values if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values))
        values = values.reshape(values.shape[0], -1) if values.ndim > 1 else values.reshape(1, -1)
        return values[:, part.start:part.end].to(torch.float32)

    def _state(self, sample: Sample) -> torch.Tensor:
        parts = [normalize_q99(self._raw(sample, p), torch.as_tensor(p.q01), torch.as_tensor(p.q99))
                 for p in self.state]
        return torch.cat(parts, dim=-1)

    def _action(self, sample: Sample) -> torch.Tensor:
        states = {p.name: self._raw(sample, p) for p in self.state}
        parts = []
        for part in self.action:
            values = self._raw(sample, part)
            if values.shape[0] % self.chunk_length:
                raise DataError(f"action.{part.name}: {values.shape[0]} rows is not a multiple of the chunk length "
                                f"{self.chunk_length}")
            if part.relative:
                anchor = states.get(part.name)
                if anchor is None:
                    raise DataError(f"data.relative_action: action.{part.name} has no state part of the same name "
                                    f"(state parts: {', '.join(states)})")
                chunks = values.shape[0] // self.chunk_length
                refs = anchor[::self.state_horizon][:chunks]
                values = (values.reshape(chunks, self.chunk_length, -1) - refs[:, None, :]).reshape(values.shape)
            parts.append(normalize_q99(values, torch.as_tensor(part.q01), torch.as_tensor(part.q99)))
        return torch.cat(parts, dim=-1)

    def _instruction(self, sample: Sample, chooser: Any) -> str:
        if not self.language:
            return "Perform the default behavior."
        sources: Sequence[LanguageSource] = self.language
        source = chooser.choice(list(sources)) if (self.random_language and self.training and len(sources) > 1) \
            else sources[0]
        return source.read(sample)
