"""DreamZero at inference: a policy observation -> the strategy's fields, and sampled actions -> dataset units.

Training samples reach the model already prepared by the ``dreamzero`` strategy; a policy observation
(``load_policy(...).predict_action``: one frame per camera ``[C, H, W]`` uint8, the state vector, the task) is
prepared here the way the strategy prepares an evaluation sample: views centre-cropped (``data.crop_scale``),
resized (antialiased bilinear) and laid out as the embodiment does, the state q01/q99-normalized with the
statistics the strategy trained with (the checkpoint's ``stats["state"]``), clamped, repeated over a block's
state rows and zero padded to ``max_state_dim``. ``postprocess_actions`` undoes the action normalization with
``stats["action"]`` (dimensions with q01 == q99 were not normalized) and drops the padding.

Limits: the observation's state vector must be the strategy's concatenated state parts (its ``state`` feature,
``data.state_key``); relative action parts are made absolute by :class:`.policy.DreamZeroPolicy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from embodied_core.errors import DataError, ObservationError
from embodied_core.policy.observation import TASK_KEY
from embodied_models.dreamzero.config import DreamZeroModelConfig
from embodied_models.dreamzero.data.config import DreamZeroDataConfig
from embodied_models.dreamzero.data.embodiments import NEGATIVE_PROMPT, compose_views, embodiment
from embodied_models.dreamzero.data.transforms import normalize_q99
from embodied_models.dreamzero.data.video import process_views

__all__ = ["ActionPostprocess", "ObservationTransform", "quantiles"]

PREPARED_KEY = "images"
"""A sample holding this field was prepared by the strategy (training); others are policy observations."""


def quantiles(stats: Mapping[str, Mapping[str, Any]] | None, key: str) -> tuple[torch.Tensor, torch.Tensor]:
    """q01 / q99 of ``stats[key]`` (float32); DataError naming what the statistics hold when absent."""
    entry = (stats or {}).get(key)
    if entry is None or "q01" not in entry or "q99" not in entry:
        have = sorted(stats or {})
        raise DataError(f"DreamZero inference needs the q01/q99 the strategy normalized {key!r} with "
                        f"(stats[{key!r}]); the checkpoint's statistics hold {have}")
    return (torch.as_tensor(np.asarray(entry["q01"]), dtype=torch.float32).reshape(-1),
            torch.as_tensor(np.asarray(entry["q99"]), dtype=torch.float32).reshape(-1))


def _view_order(camera_keys: list[str], names: tuple[str, ...]) -> list[str]:
    """Camera keys in the embodiment's view order (a key names a view when it equals it or ends in '.name')."""
    ordered = [next((k for k in camera_keys if k == n or k.endswith("." + n)), None) for n in names]
    return [k for k in ordered if k is not None] if all(ordered) else list(camera_keys)


class ObservationTransform:
    """Per-sample transform: strategy-prepared samples pass through, policy observations are prepared (module doc).

    Args:
        model_config, data_config: the run's sections.
        stats: the checkpoint's statistics (``state`` q01/q99).
    """

    def __init__(self, model_config: DreamZeroModelConfig, data_config: DreamZeroDataConfig,
                 stats: Mapping[str, Mapping[str, Any]] | None) -> None:
        emb = embodiment(data_config.embodiment_tag)
        self.embodiment_id, self.layout = emb.id, emb.layout
        self.cameras = _view_order(list(data_config.camera_keys or []), emb.video)
        self.state_key = data_config.state_key
        self.size = (data_config.image_height, data_config.image_width)
        self.crop_scale = data_config.crop_scale
        self.rows = model_config.num_state_per_block
        self.width = model_config.max_state_dim
        self.state_q = quantiles(stats, "state") if stats is not None else None

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        """A prepared sample unchanged; an observation -> images, state (+ mask), text, embodiment_id."""
        if PREPARED_KEY in sample:
            return sample
        if self.state_q is None:
            raise DataError("DreamZero observations need the checkpoint's statistics (none were given)")
        views, _ = process_views([torch.as_tensor(sample[k]).unsqueeze(0) for k in self.cameras], size=self.size,
                                 crop_scale=self.crop_scale, training=False, jitter=None, generator=None)
        state = torch.as_tensor(sample[self.state_key], dtype=torch.float32).reshape(1, -1)
        q01, q99 = self.state_q
        if state.shape[-1] != q01.numel():
            raise ObservationError(f"observation[{self.state_key!r}] has {state.shape[-1]} values; the strategy's "
                                   f"state parts have {q01.numel()}")
        if state.shape[-1] > self.width:
            raise ObservationError(f"observation[{self.state_key!r}] has {state.shape[-1]} values, more than "
                                   f"model.max_state_dim={self.width}")
        padded = torch.zeros(self.rows, self.width)
        padded[:, : state.shape[-1]] = normalize_q99(state, q01, q99)
        mask = torch.zeros(self.rows, self.width, dtype=torch.bool)
        mask[:, : state.shape[-1]] = True
        return {"images": compose_views(views, self.layout), "state": padded, "state_mask": mask,
                "text": str(sample.get(TASK_KEY, "")), "text_negative": NEGATIVE_PROMPT,
                "embodiment_id": self.embodiment_id}


class ActionPostprocess:
    """``sample_actions`` output ``[B, H, max_action_dim]`` -> dataset units ``[B, H, action_dim]`` (picklable)."""

    def __init__(self, stats: Mapping[str, Mapping[str, Any]]) -> None:
        self.q01, self.q99 = quantiles(stats, "action")

    def __call__(self, actions: torch.Tensor) -> torch.Tensor:
        """Inverse of the strategy's q99 normalization on the real action dimensions."""
        dim = self.q01.numel()
        x = actions[..., :dim].float()
        q01, q99 = self.q01.to(x.device), self.q99.to(x.device)
        scaled = (x + 1) / 2 * (q99 - q01) + q01
        return torch.where(q01 != q99, scaled, x)
