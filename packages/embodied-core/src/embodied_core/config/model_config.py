"""Base classes of a model plugin's ``model:`` and ``data:`` sections.

Both are attrs classes with ``kw_only=True`` and a docstring under every field (shown in ``--help``).
They must not import torch: ``embodied train --model-name X --help`` builds its parser from them.
"""

from __future__ import annotations

import attrs

__all__ = ["BaseDataConfig", "BaseModelConfig"]


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
    ``dummy_datasets`` shapes its random samples from them.
    """

    camera_keys: list[str] = attrs.field(factory=lambda: ["observation.images.front"])
    """Camera feature keys to load (``observation.images.<cam>``)."""
    image_size: tuple[int, int] = (96, 96)
    """(height, width) of camera frames produced by dummy_datasets and expected by the model."""
    state_key: str = "observation.state"
    """Dataset key of the proprioceptive state."""
    action_key: str = "action"
    """Dataset key of the action."""
    state_dim: int = 8
    """Dimension of the state vector."""
    action_dim: int = 8
    """Dimension of the action vector."""
    action_horizon: int = 16
    """Number of future actions per sample (action chunk length), including the current one."""
    state_history: int = 1
    """Number of state frames per sample, ending at the current frame."""
    image_history: int = 1
    """Number of camera frames per sample, ending at the current frame."""

    def validate(self) -> list[str]:
        """Rules spanning several fields; returns one message per problem (empty when valid)."""
        problems = []
        for name in ("state_dim", "action_dim", "action_horizon", "state_history", "image_history"):
            if getattr(self, name) < 1:
                problems.append(f"data.{name}: must be >= 1 (got {getattr(self, name)})")
        if any(side < 1 for side in self.image_size):
            problems.append(f"data.image_size: both sides must be >= 1 (got {self.image_size})")
        return problems
