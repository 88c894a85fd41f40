"""Normalization of features with dataset stats (used by model transforms).

Modes (per feature key):
- ``"quantile"``: ``[q01, q99] -> [-1, 1]``, ``2 (x - q01) / (q99 - q01 + eps) - 1`` (openpi / pi0.5);
  values outside the 1st-99th percentile land outside ``[-1, 1]`` unless ``clip=True``.
- ``"mean_std"``: ``(x - mean) / (std + eps)``.
- ``"min_max"``: ``[min, max] -> [-1, 1]``.
- ``"identity"``: unchanged.

The stats broadcast over leading dimensions: a feature with stats of shape ``[D]`` normalizes ``[..., D]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
import numpy as np
import torch

__all__ = ["NORM_MODES", "FeatureNormalizer", "Normalizer", "quantile_normalize", "quantile_unnormalize",
           "state_action_normalizer"]

NormMode = Literal["quantile", "mean_std", "min_max", "identity"]
NORM_MODES: tuple[str, ...] = ("quantile", "mean_std", "min_max", "identity")
_REQUIRED: dict[str, tuple[str, str]] = {"quantile": ("q01", "q99"), "mean_std": ("mean", "std"),
                                         "min_max": ("min", "max")}


def quantile_normalize(x: torch.Tensor, q01: torch.Tensor, q99: torch.Tensor, *, eps: float = 1e-6,
                       clip: bool = False) -> torch.Tensor:
    """Maps ``[q01, q99]`` to ``[-1, 1]`` (optionally clipped to it)."""
    y = (x - q01) / (q99 - q01 + eps) * 2.0 - 1.0
    return y.clamp(-1.0, 1.0) if clip else y


def quantile_unnormalize(y: torch.Tensor, q01: torch.Tensor, q99: torch.Tensor, *, eps: float = 1e-6) -> torch.Tensor:
    """Inverse of :func:`quantile_normalize` (without clipping)."""
    return (y + 1.0) / 2.0 * (q99 - q01 + eps) + q01


@attrs.frozen
class FeatureNormalizer:
    """Normalizes one feature; ``low``/``high`` are the mode's two stats as float32 tensors."""

    mode: str
    low: torch.Tensor
    high: torch.Tensor
    eps: float = 1e-6
    clip: bool = False

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """Normalized ``x`` (same dtype as ``x``)."""
        if self.mode == "identity":
            return x
        low, high = self.low.to(x.device), self.high.to(x.device)
        xf = x.float()
        if self.mode == "quantile":
            y = quantile_normalize(xf, low, high, eps=self.eps, clip=self.clip)
        elif self.mode == "mean_std":
            y = (xf - low) / (high + self.eps)
        else:
            y = (xf - low) / (high - low + self.eps) * 2.0 - 1.0
            y = y.clamp(-1.0, 1.0) if self.clip else y
        return y.to(x.dtype)

    def unnormalize(self, y: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`normalize` (exact unless clipping cut values off)."""
        if self.mode == "identity":
            return y
        low, high = self.low.to(y.device), self.high.to(y.device)
        yf = y.float()
        if self.mode == "quantile":
            x = quantile_unnormalize(yf, low, high, eps=self.eps)
        elif self.mode == "mean_std":
            x = yf * (high + self.eps) + low
        else:
            x = (yf + 1.0) / 2.0 * (high - low + self.eps) + low
        return x.to(y.dtype)


class Normalizer:
    """Per-key normalization of sample dicts from dataset stats.

    Args:
        stats: ``{key: {stat: array}}`` (e.g. a training dataset's ``stats``).
        modes: ``{key: mode}``; keys not listed are left alone.
        eps: added to the denominator; clip: clip quantile/min-max outputs to ``[-1, 1]``.
    """

    def __init__(self, stats: Mapping[str, Mapping[str, Any]], modes: Mapping[str, str], *, eps: float = 1e-6,
                 clip: bool = False) -> None:
        self.features: dict[str, FeatureNormalizer] = {}
        problems = []
        for key, mode in modes.items():
            if mode not in NORM_MODES:
                problems.append(f"{key}: unknown normalization mode {mode!r} (valid: {', '.join(NORM_MODES)})")
                continue
            if mode == "identity":
                self.features[key] = FeatureNormalizer(mode, torch.zeros(()), torch.ones(()), eps, clip)
                continue
            names = _REQUIRED[mode]
            have = stats.get(key, {})
            missing = [n for n in names if n not in have]
            if missing:
                problems.append(f"{key}: {mode} normalization needs stats {', '.join(missing)} "
                                f"(the dataset stats have {', '.join(sorted(have)) or 'none for this key'})")
                continue
            low, high = (torch.as_tensor(np.asarray(have[n], dtype=np.float32)) for n in names)
            self.features[key] = FeatureNormalizer(mode, low, high, eps, clip)
        if problems:
            raise ValueError("cannot build the normalizer:\n  " + "\n  ".join(problems))

    def normalize(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``sample`` with the configured keys normalized."""
        out = dict(sample)
        for key, feature in self.features.items():
            if key in out:
                out[key] = feature.normalize(torch.as_tensor(out[key]))
        return out

    def unnormalize(self, sample: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``sample`` with the configured keys mapped back to dataset units."""
        out = dict(sample)
        for key, feature in self.features.items():
            if key in out:
                out[key] = feature.unnormalize(torch.as_tensor(out[key]))
        return out


def state_action_normalizer(mode: str, stats: Mapping[str, Mapping[str, Any]] | None, *, state_key: str,
                            action_key: str, raw_hint: str = "") -> Normalizer | None:
    """A model's state/action normalizer for its ``data.normalization`` (``"none"``: None), with errors that name the
    setting to change.

    Args:
        mode: ``data.normalization`` (a mode of :data:`NORM_MODES`, or ``"none"``).
        stats: the dataset statistics core resolved (None when the run has none).
        state_key, action_key: ``data.state_key`` / ``data.action_key``.
        raw_hint: appended to the "set data.normalization=none" advice (e.g. " (X-VLA's default)").

    Raises:
        DataError: no statistics, no statistics for a key, or statistics that lack what ``mode`` needs.
    """
    from embodied_core.errors import DataError

    if mode == "none":
        return None
    keys = (state_key, action_key)
    if stats is None:
        raise DataError(f"data.normalization={mode} needs the dataset statistics of "
                        f"{' and '.join(map(repr, keys))}, but none were given; set data.normalization=none to "
                        f"train on raw values{raw_hint}")
    absent = [key for key in keys if key not in stats]
    if absent:
        raise DataError(f"data.normalization={mode}: the dataset statistics have no "
                        f"{' or '.join(map(repr, absent))} (they cover {', '.join(sorted(stats)) or 'nothing'}); "
                        "set data.state_key / data.action_key to the dataset's names")
    try:
        return Normalizer(stats, dict.fromkeys(keys, mode))
    except ValueError as exc:
        raise DataError(f"data.normalization={mode}: {exc}") from None
