"""The base of the pi05 / smolvla / xvla per-sample transforms: what each holds and does the same way.

A transform holds the run's ``model:`` / ``data:`` sections, its text tokenizer and the state/action normalizer; it
reads and normalizes the state and the action targets, truncates over-long token ids with one warning, and maps
sampled actions back to dataset units (the transforms' ``postprocess_actions``). How it builds images and prompts
stays in each port. Picklable: runs in DataLoader workers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from embodied_models.vla.features import action_is_pad, actions_in_dataset_units, feature, pad_last

if TYPE_CHECKING:
    from embodied_data.normalize import Normalizer

__all__ = ["VLASampleTransform"]


class VLASampleTransform:
    """Training samples and inference observations (the same keys without ``action``) both pass through it.

    Args:
        model_config, data_config: the run's sections.
        tokenizer: the port's text tokenizer.
        normalizer: the state/action normalizer (None with ``data.normalization=none``).
    """

    logger: ClassVar[logging.Logger] = logging.getLogger("embodied.models")
    """Where the truncation warning goes (each port names its own)."""

    def __init__(self, model_config: Any, data_config: Any, tokenizer: Any, normalizer: Normalizer | None) -> None:
        self.model_config = model_config
        self.data_config = data_config
        self.tokenizer = tokenizer
        self.normalizer = normalizer
        self._warned_truncation = False

    def read(self, sample: Mapping[str, Any], kind: str) -> torch.Tensor:
        """The sample's data.<kind>_key (``kind``: ``"state"`` or ``"action"``) as float32, checked against
        data.<kind>_dim and normalized."""
        cfg = self.data_config
        key, dim = (cfg.state_key, cfg.state_dim) if kind == "state" else (cfg.action_key, cfg.action_dim)
        return feature(sample, key, dim, kind=kind, normalizer=self.normalizer)

    def action_targets(self, sample: Mapping[str, Any], width: int) -> dict[str, torch.Tensor]:
        """``actions`` [H, width] (normalized, zero-padded) and ``action_is_pad`` [H]; nothing for an inference
        observation (no data.action_key). :meth:`check_actions` sees the actions before the padding."""
        if self.data_config.action_key not in sample:
            return {}
        actions = self.read(sample, "action")
        if actions.ndim == 1:
            actions = actions[None]
        self.check_actions(sample, actions)
        return {"actions": pad_last(actions, width),
                "action_is_pad": action_is_pad(sample, self.data_config.action_key, actions.shape[0])}

    def check_actions(self, sample: Mapping[str, Any], actions: torch.Tensor) -> None:
        """A port's own check of the normalized action targets [H, action_dim] (none here)."""

    def truncated(self, ids: Sequence[int], limit: int, *, what: str, setting: str) -> Sequence[int]:
        """``ids`` cut to ``limit``, warning once per transform (``what`` has N tokens; truncated to ``setting``)."""
        if len(ids) <= limit:
            return ids
        if not self._warned_truncation:
            self.logger.warning("%s has %d tokens; truncated to %s=%d", what, len(ids), setting, limit)
            self._warned_truncation = True
        return ids[:limit]

    def unnormalize_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Model actions [..., padded width] -> dataset units [..., data.action_dim] (the transforms'
        ``postprocess_actions``)."""
        return actions_in_dataset_units(actions, action_dim=self.data_config.action_dim,
                                        action_key=self.data_config.action_key, normalizer=self.normalizer)
