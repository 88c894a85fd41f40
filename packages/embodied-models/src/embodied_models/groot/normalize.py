"""GR00T's state/action normalization (Isaac-GR00T / LoongForge ``StateActionProcessor`` semantics, N1.6 and N1.7),
per dimension.

- ``percentile`` / ``min_max``: ``2 (x - low) / (high - low) - 1`` with ``(low, high)`` = ``(q01, q99)`` or
  ``(min, max)``; a dimension whose bounds coincide (``isclose``) maps to 0; optionally clipped to [-1, 1]. The
  inverse clips to [-1, 1] first, then maps back (a constant dimension returns its value).
- ``mean_std``: ``(x - mean) / std``; a dimension with std 0 passes through unchanged (both ways).

The reference's min-max has no epsilon (embodied_data.normalize adds 1e-6), hence this module. Math in float64.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
import torch

from embodied_core.errors import DataError

__all__ = ["STAT_NAMES", "GrootNormalizer"]

STAT_NAMES = {"percentile": ("q01", "q99"), "min_max": ("min", "max"), "mean_std": ("mean", "std")}


@attrs.frozen
class GrootNormalizer:
    """Normalizes one feature's last dimension (``low`` / ``high`` are the mode's two stats, float64 [D])."""

    mode: str
    low: torch.Tensor
    high: torch.Tensor
    clip: bool = True

    @classmethod
    def from_stats(cls, stats: Mapping[str, Mapping[str, Any]], key: str, mode: str, *, clip: bool,
                   setting: str) -> GrootNormalizer:
        """The normalizer of ``stats[key]``; DataError naming the key, the missing statistics and ``setting``."""
        names = STAT_NAMES[mode]
        entry = stats.get(key)
        if entry is None:
            raise DataError(f"{setting}={mode}: the dataset statistics have no {key!r} (they cover "
                            f"{', '.join(sorted(stats)) or 'nothing'}); set data.state_key / data.action_key to the "
                            "dataset's names, or data.normalization=none")
        missing = [n for n in names if n not in entry]
        if missing:
            raise DataError(f"{setting}={mode}: the statistics of {key!r} lack {', '.join(missing)} (they have "
                            f"{', '.join(sorted(entry))}); choose another data.normalization")
        low, high = (torch.as_tensor(np.asarray(entry[n], dtype=np.float64).reshape(-1)) for n in names)
        return cls(mode, low, high, clip)

    @property
    def dim(self) -> int:
        """Width of the feature."""
        return int(self.low.shape[0])

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """Normalized ``x`` [..., D] as float32."""
        xd = x.double()
        if self.mode == "mean_std":
            keep = self.high != 0
            y = torch.where(keep, (xd - self.low) / torch.where(keep, self.high, 1.0), xd)
        else:
            keep = ~torch.isclose(self.high, self.low)
            span = torch.where(keep, self.high - self.low, 1.0)
            y = torch.where(keep, 2.0 * (xd - self.low) / span - 1.0, torch.zeros_like(xd))
            if self.clip:
                y = y.clamp(-1.0, 1.0)
        return y.float()

    def unnormalize(self, y: torch.Tensor) -> torch.Tensor:
        """Dataset units of normalized ``y`` [..., D] as float32 (min-max modes clip ``y`` to [-1, 1] first)."""
        low, high = self.low.to(y.device), self.high.to(y.device)
        yd = y.double()
        if self.mode == "mean_std":
            x = torch.where(high != 0, yd * high + low, yd)
        else:
            x = (yd.clamp(-1.0, 1.0) + 1.0) / 2.0 * (high - low) + low
        return x.float()
