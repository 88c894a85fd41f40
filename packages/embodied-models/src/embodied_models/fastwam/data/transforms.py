"""FastWAM's per-sample transform and ``make_transforms`` (what the model spec's ``transforms`` points to).

:class:`FastWAMSampleTransform` turns a LeRobot sample (from the ``fastwam`` strategy, or an inference observation)
into the sample the collator stacks:

- ``video`` float32 [3, F, H, W * n_cam] in [-1, 1]: each camera (sorted by key) as ``u8 / 255``, resized to
  ``data.image_size`` (bilinear, antialiased: torchvision's ``resize`` on tensors), joined along the width, then
  ``(x - 0.5) / 0.5``;
- ``action`` float32 [H, A]: normalized (``data.normalization_mode``), zero-padded to ``data.max_action_dim``
  (absent in inference observations), with ``action_is_pad`` bool [H];
- ``proprio`` float32 [1, D]: the normalized current state (not with ``model.use_proprio=false``: then the state is
  not read);
- ``prompt`` (str): the task in FastWAM's template (:func:`~.prompts.format_prompt`);
- ``image_is_pad`` bool [F] (``data.image_pad_mode=real`` only): frames read past the episode end (any camera).

q01/q99: ``2 (x - q01) / (q99 - q01) - 1`` with a zero range replaced by 1e-8 and no clamp (LoongForge's
formula, in float32); mean/std: ``(x - mean) / std`` with a zero std replaced by 1e-8.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import torch
import torch.nn.functional as F

from embodied_core.errors import DataError
from embodied_core.model_api import Transforms
from embodied_core.protocols import Stats
from embodied_models.fastwam.data.collator import FastWAMCollator
from embodied_models.fastwam.data.config import FastWAMDataConfig
from embodied_models.fastwam.data.prompts import format_prompt
from embodied_models.fastwam.data.strategy import camera_order
from embodied_models.images import as_frames

__all__ = ["ActionPostprocess", "FastWAMSampleTransform", "Normalizer", "make_transforms", "resize_camera"]

_EPS = 1e-8


@attrs.frozen
class Normalizer:
    """Maps one feature to the model's range and back (see the module docstring for the formulas)."""

    mode: str
    offset: torch.Tensor
    """q01 (q01_q99) or mean (mean_std), float32."""
    scale: torch.Tensor
    """q99 - q01 or std, float32, zeros replaced by 1e-8."""

    @classmethod
    def from_stats(cls, stats: Stats | None, key: str, mode: str) -> Normalizer:
        """The normalizer of ``key`` from the dataset statistics; a DataError names what is missing."""
        names = ("q01", "q99") if mode == "q01_q99" else ("mean", "std")
        entry = (stats or {}).get(key)
        if entry is None or any(n not in entry for n in names):
            have = sorted(entry) if entry is not None else []
            raise DataError(f"data.normalization_mode={mode} needs the {'/'.join(names)} statistics of {key!r}, but "
                            f"the dataset statistics have {have or 'none for it'}")
        first, second = (torch.as_tensor(np.asarray(entry[n]), dtype=torch.float32) for n in names)
        if mode == "q01_q99":
            span = second - first
            return cls(mode=mode, offset=first, scale=torch.where(span == 0, torch.tensor(_EPS), span))
        return cls(mode=mode, offset=first, scale=torch.where(second == 0, torch.tensor(_EPS), second))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        if self.mode == "q01_q99":
            return 2.0 * (x - self.offset) / self.scale - 1.0
        return (x - self.offset) / self.scale

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """Dataset units from normalized values."""
        offset, scale = self.offset.to(y.device), self.scale.to(y.device)
        if self.mode == "q01_q99":
            return (y.float() + 1.0) / 2.0 * scale + offset
        return y.float() * scale + offset


def resize_camera(frames: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """[T, 3, h, w] frames (uint8, or float in [0, 1]) -> float32 [T, 3, H, W] in [0, 1], bilinear + antialias."""
    frames = frames.float() / 255.0 if frames.dtype == torch.uint8 else frames.float()
    if tuple(frames.shape[-2:]) == tuple(size):
        return frames
    return F.interpolate(frames, size=list(size), mode="bilinear", align_corners=False, antialias=True)


class FastWAMSampleTransform:
    """LeRobot sample -> FastWAM sample (see the module docstring). Picklable.

    Args:
        data_config: the run's data section.
        stats: the dataset statistics (``make_transforms``' ``stats``).
        use_proprio: read the state into ``proprio`` (``model.use_proprio``).
    """

    def __init__(self, data_config: FastWAMDataConfig, stats: Stats | None, *, use_proprio: bool = True) -> None:
        self.cfg = data_config
        self.action_norm = Normalizer.from_stats(stats, data_config.action_key, data_config.normalization_mode)
        self.state_norm = (Normalizer.from_stats(stats, data_config.state_key, data_config.normalization_mode)
                           if use_proprio else None)

    def _cameras(self, sample: Mapping[str, Any]) -> list[str]:
        cameras = camera_order(self.cfg, [k for k in sample if k.startswith("observation.images.")
                                          and not k.endswith("_is_pad")])
        missing = [c for c in cameras if c not in sample]
        if missing or not cameras:
            raise DataError(f"FastWAM sample lacks the camera(s) {missing or self.cfg.camera_keys} (it has "
                            f"{sorted(k for k in sample if not k.endswith('_is_pad'))})")
        return cameras

    def _video(self, sample: Mapping[str, Any], cameras: list[str]) -> torch.Tensor:
        size = tuple(self.cfg.image_size)
        views = [resize_camera(as_frames(sample[cam], cam), size) for cam in cameras]
        lengths = {v.shape[0] for v in views}
        if len(lengths) > 1:
            raise DataError(f"cameras {cameras} have different frame counts {[v.shape[0] for v in views]}")
        video = torch.cat(views, dim=-1)
        return ((video - 0.5) / 0.5).permute(1, 0, 2, 3).contiguous()

    def _action(self, action: Any) -> torch.Tensor:
        action = torch.as_tensor(action).float()
        if action.ndim == 1:
            action = action[None]
        action = self.action_norm(action)
        width = self.cfg.max_action_dim
        if width is not None and action.shape[-1] < width:
            action = F.pad(action, (0, width - action.shape[-1]))
        return action

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        cfg = self.cfg
        cameras = self._cameras(sample)
        video = self._video(sample, cameras)
        out: dict[str, Any] = {"video": video}
        if self.state_norm is not None:
            if cfg.state_key not in sample:
                raise DataError(f"FastWAM sample lacks the state {cfg.state_key!r} (data.state_key)")
            state = torch.as_tensor(sample[cfg.state_key]).float().reshape(-1)
            out["proprio"] = self.state_norm(state)[None]
        if sample.get(cfg.action_key) is not None:
            out["action"] = self._action(sample[cfg.action_key])
        out["prompt"] = format_prompt(sample.get("task", ""), cfg.prompt_template)
        if sample.get("index") is not None:  # training samples: keys the model's per-sample draws
            out["index"] = int(sample["index"])
        pad_key = f"{cfg.action_key}_is_pad"
        if "action" in out and sample.get(pad_key) is not None:
            out["action_is_pad"] = torch.as_tensor(sample[pad_key]).bool()
        if cfg.image_pad_mode == "real":
            pad = torch.zeros(video.shape[1], dtype=torch.bool)
            for cam in cameras:
                if sample.get(f"{cam}_is_pad") is not None:
                    pad |= torch.as_tensor(sample[f"{cam}_is_pad"]).bool().reshape(-1)
            out["image_is_pad"] = pad
        return out


class ActionPostprocess:
    """Sampled actions [B, H, D_model] -> dataset units [B, H, action_dim] (drops padding dims, unnormalizes), then
    ``data.toggle_action_dimensions``: each listed dimension a becomes ``sign(-(2 a - 1))`` (lerobot's FastWAM
    LIBERO gripper toggle, after unnormalizing)."""

    def __init__(self, normalizer: Normalizer, toggle_dimensions: tuple[int, ...] = ()) -> None:
        self.normalizer = normalizer
        self.width = int(normalizer.offset.shape[-1])
        bad = [d for d in toggle_dimensions if not -self.width <= d < self.width]
        if bad:
            raise DataError(f"data.toggle_action_dimensions={list(toggle_dimensions)}: {bad} out of range for "
                            f"{self.width} action dims (valid: {-self.width}..{self.width - 1})")
        self.toggle = sorted({d % self.width for d in toggle_dimensions})

    def __call__(self, actions: torch.Tensor) -> torch.Tensor:
        out = self.normalizer.inverse(actions[..., : self.width])
        if self.toggle:
            out = out.clone()
            out[..., self.toggle] = torch.sign(-(out[..., self.toggle] * 2.0 - 1.0))
        return out


def make_transforms(model_config: Any, data_config: FastWAMDataConfig, *, stats: Stats | None) -> Transforms:
    """FastWAM's data pipeline: :class:`FastWAMSampleTransform`, :class:`~.collator.FastWAMCollator` and the action
    postprocessing (of ``model_config`` only ``use_proprio`` is read: every other setting is in the data section)."""
    sample_transform = FastWAMSampleTransform(data_config, stats,
                                              use_proprio=bool(getattr(model_config, "use_proprio", True)))
    return Transforms(sample_transform=sample_transform, collate_fn=FastWAMCollator(data_config),
                      postprocess_actions=ActionPostprocess(sample_transform.action_norm,
                                                            tuple(data_config.toggle_action_dimensions)))
