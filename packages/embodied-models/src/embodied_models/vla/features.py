"""Per-sample pieces of the VLA ports' sample transforms: state/action features, their padding, the task string,
right-padded token ids, and mapping sampled actions back to dataset units.

Each port keeps its own camera handling (slot layout, resize and padding convention differ: pi0.5 centres,
SmolVLA and X-VLA pad left/top at different points, GR00T crops) and its own prompt text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from embodied_core.errors import DataError

if TYPE_CHECKING:
    from embodied_data.normalize import Normalizer

__all__ = ["action_is_pad", "actions_in_dataset_units", "feature", "pad_last", "right_pad_ids", "task_string"]


def feature(sample: Mapping[str, Any], key: str, dim: int | None, *, kind: str,
            normalizer: Normalizer | None) -> torch.Tensor:
    """``sample[key]`` as float32, checked against the configured width and normalized (when a normalizer is given).

    Args:
        key: the dataset key (data.state_key / data.action_key).
        dim: the configured width (data.<kind>_dim).
        kind: ``"state"`` or ``"action"``, for the messages.
        normalizer: the state/action normalizer, or None for raw values.
    """
    if key not in sample:
        raise DataError(f"sample has no {key!r} (keys: {', '.join(sorted(sample))}); set data.{kind}_key to the "
                        "dataset's name")
    value = torch.as_tensor(sample[key]).float()
    if value.shape[-1] != dim:
        raise DataError(f"{key}: last dimension is {value.shape[-1]} but the data config says {dim}; set "
                        f"data.{kind}_dim={value.shape[-1]}")
    if normalizer is not None:
        value = normalizer.features[key].normalize(value)
    return value


def pad_last(value: torch.Tensor, width: int) -> torch.Tensor:
    """float32 copy of ``value`` zero-padded in its last dimension to ``width``."""
    out = torch.zeros((*value.shape[:-1], width), dtype=torch.float32)
    out[..., : value.shape[-1]] = value
    return out


def action_is_pad(sample: Mapping[str, Any], action_key: str, steps: int) -> torch.Tensor:
    """bool [steps]: the sample's ``<action_key>_is_pad`` (True past the episode end), all False when it has none."""
    is_pad = sample.get(f"{action_key}_is_pad")
    if is_pad is None:
        return torch.zeros(steps, dtype=torch.bool)
    return torch.as_tensor(is_pad, dtype=torch.bool).reshape(-1)


def task_string(sample: Mapping[str, Any], *, why: str) -> str:
    """The sample's ``task``; a DataError ending with ``why`` (the port's need for it) when it is not a string."""
    task = sample.get("task")
    if not isinstance(task, str):
        raise DataError(f"sample has no task string (got {type(task).__name__}); {why}")
    return task


def right_pad_ids(ids: Sequence[int], length: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(int64 [length] ids right-padded with ``pad_id``, bool [length] True on the real ones); ``ids`` must fit."""
    tokens = torch.full((length,), pad_id, dtype=torch.long)
    tokens[: len(ids)] = torch.tensor(ids, dtype=torch.long)
    mask = torch.zeros(length, dtype=torch.bool)
    mask[: len(ids)] = True
    return tokens, mask


def actions_in_dataset_units(actions: torch.Tensor, *, action_dim: int | None, action_key: str,
                        normalizer: Normalizer | None) -> torch.Tensor:
    """Model actions [..., padded width] -> dataset units [..., action_dim]: the real dims, unnormalized."""
    real = actions[..., :action_dim]
    if normalizer is None:
        return real
    return normalizer.features[action_key].unnormalize(real)
