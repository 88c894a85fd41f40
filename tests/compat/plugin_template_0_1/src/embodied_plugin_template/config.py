"""Configs of ``tiny_flow_policy`` (attrs only, no torch: ``--help`` is built from them)."""

from __future__ import annotations

import attrs

from embodied_core import BaseDataConfig, BaseModelConfig


@attrs.define(kw_only=True)
class TinyFlowPolicyConfig(BaseModelConfig):
    """The ``model:`` section."""

    conv_channels: tuple[int, int, int] = (16, 32, 32)
    """Channels of the three stride-2 convolutions of the image encoder."""
    hidden_dim: int = 256
    """Width of the flow-matching MLP."""
    time_embed_dim: int = 32
    """Size of the sinusoidal flow-time embedding."""
    num_inference_steps: int = 10
    """Euler steps from noise (t=1) to actions (t=0) in sample_actions."""

    def validate(self) -> list[str]:
        problems = []
        if self.hidden_dim < 8:
            problems.append(f"model.hidden_dim: must be >= 8 (got {self.hidden_dim})")
        if self.time_embed_dim % 2:
            problems.append(f"model.time_embed_dim: must be even (got {self.time_embed_dim})")
        if self.num_inference_steps < 1:
            problems.append(f"model.num_inference_steps: must be >= 1 (got {self.num_inference_steps})")
        return problems


@attrs.define(kw_only=True)
class TinyFlowDataConfig(BaseDataConfig):
    """The ``data:`` section: 64x64 frames, chunks of 8 actions.

    ``camera_keys``, ``state_dim`` and ``action_dim`` are inherited unset: core fills them from the dataset's
    metadata before the model is built (``dummy_datasets``: one camera, 8-D state and action).
    """

    image_size: tuple[int, int] = (64, 64)
    """(height, width) the encoder expects; frames of other sizes are resized."""
    action_horizon: int = 8
    """Actions predicted per sample."""
