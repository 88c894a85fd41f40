"""Base classes of a model plugin's ``model:`` and ``data:`` sections.

Both are attrs classes with ``kw_only=True`` and a docstring under every field (shown in ``--help``).
They must not import torch: ``embodied train --model-name X --help`` builds its parser from them.
"""

from __future__ import annotations

import attrs

from embodied_core.config.image_augmentation import ImageAugmentationConfig

__all__ = ["INFERRED_FIELDS", "REQUIRED_DATA_FIELDS", "BaseDataConfig", "BaseModelConfig"]

INFERRED_FIELDS = ("camera_keys", "state_dim", "action_dim", "state_names", "action_names")
"""Data fields whose ``None`` default means "from the dataset's metadata" (:mod:`embodied_core.config.infer`)."""

REQUIRED_DATA_FIELDS = ("camera_keys", "state_dim", "action_dim")
"""Inferred fields a model cannot be built without: still unset after inference, they are an error."""


@attrs.define(kw_only=True)
class BaseModelConfig:
    """Fields every model shares. Subclass it and add the model's own fields."""

    def validate(self) -> list[str]:
        """Rules spanning several fields; returns one message per problem (empty when valid)."""
        return []


@attrs.define(kw_only=True)
class BaseDataConfig:
    """What a model asks of the data: which keys, which time offsets, which shapes.

    Dataset formats read these fields to decide what to load (the model answers data questions);
    ``dummy_datasets`` shapes its random samples from them. The fields of :data:`INFERRED_FIELDS` default to
    ``None``: the selected dataset format fills them from its metadata before the model is built, and a value set
    explicitly that disagrees with the dataset is an error.
    """

    camera_keys: list[str] | None = None
    """Camera feature keys to load (``observation.images.<cam>``), in model order; unset: every camera of the
    dataset in its declared order (``info.json``)."""
    image_size: tuple[int, int] = (96, 96)
    """(height, width) of camera frames produced by dummy_datasets and expected by the model."""
    state_key: str = "observation.state"
    """Dataset key of the proprioceptive state."""
    action_key: str = "action"
    """Dataset key of the action."""
    state_dim: int | None = None
    """Dimension of the state vector; unset: the width of ``state_key`` in the dataset's metadata."""
    action_dim: int | None = None
    """Dimension of the action vector; unset: the width of ``action_key`` in the dataset's metadata."""
    state_names: list[str] | None = None
    """Name of each state dimension; unset: the dataset's ``names`` of ``state_key`` (when it declares them)."""
    action_names: list[str] | None = None
    """Name of each action dimension; unset: the dataset's ``names`` of ``action_key`` (when it declares them)."""
    action_horizon: int = 16
    """Number of future actions per sample (action chunk length), including the current one."""
    state_history: int = 1
    """Number of state frames per sample, ending at the current frame."""
    image_history: int = 1
    """Number of camera frames per sample, ending at the current frame."""
    image_augmentation: ImageAugmentationConfig = attrs.field(factory=ImageAugmentationConfig)
    """Training-only augmentation of the camera frames, between decoding and the model's transforms (a preset
    and/or ops; see embodied_core.config.image_augmentation). Off unless preset or ops is set."""

    def validate(self) -> list[str]:
        """Rules spanning several fields; returns one message per problem (empty when valid)."""
        problems = []
        for name in ("state_dim", "action_dim", "action_horizon", "state_history", "image_history"):
            value = getattr(self, name)
            if value is not None and value < 1:
                problems.append(f"data.{name}: must be >= 1 (got {value})")
        if any(side < 1 for side in self.image_size):
            problems.append(f"data.image_size: both sides must be >= 1 (got {self.image_size})")
        for kind in ("state", "action"):
            names, dim = getattr(self, f"{kind}_names"), getattr(self, f"{kind}_dim")
            if names is not None and dim is not None and len(names) != dim:
                problems.append(f"data.{kind}_names has {len(names)} names but data.{kind}_dim is {dim}; give one "
                                f"name per dimension (or leave data.{kind}_names unset)")
        return problems
