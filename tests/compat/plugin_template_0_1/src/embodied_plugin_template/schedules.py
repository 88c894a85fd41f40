"""``warmup_stable_decay``: warmup, a long plateau at the peak LR, then a short decay to ``--min-lr``.

The schedule (also called WSD or trapezoidal) keeps the peak LR for most of training, so a run can be
extended or branched from a plateau checkpoint; only the last ``decay_fraction`` of the steps decays. It
shows a plugin with its own config fields: ``plugins.warmup_stable_decay.decay_fraction=0.1`` (or
``--plugins.warmup-stable-decay.decay-fraction 0.1``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import attrs

from embodied_core import TrainingArgs

__all__ = ["WarmupStableDecayOptions", "build_warmup_stable_decay"]


def _fraction(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise ValueError(f"must be in (0, 1] (got {value!r})")


@attrs.define(kw_only=True)
class WarmupStableDecayOptions:
    """Options of the ``warmup_stable_decay`` LR schedule."""

    decay_fraction: float = attrs.field(default=0.2, validator=_fraction)
    """Share of the decay length (--lr-decay-iters, default --train-iters) spent decaying at the end; the steps
    before it (after warmup) stay at the peak LR."""
    decay_shape: Literal["linear", "cosine", "sqrt"] = "linear"
    """Shape of the final decay from the peak to --min-lr: linear, half a cosine, or 1 - sqrt(progress)."""


_SHAPES: dict[str, Callable[[float], float]] = {
    "linear": lambda p: 1.0 - p,
    "cosine": lambda p: 0.5 * (1.0 + math.cos(math.pi * p)),
    "sqrt": lambda p: 1.0 - math.sqrt(p),
}


def build_warmup_stable_decay(args: TrainingArgs, *,
                              options: WarmupStableDecayOptions) -> Callable[[int, float], float]:
    """Factory named by the spec: ``lr(step, base_lr)`` for a parameter group whose peak LR is ``base_lr``."""
    total = args.lr_decay_iters if args.lr_decay_iters is not None else args.train_iters
    warmup = args.lr_warmup_iters
    decay_start = max(warmup, total - math.ceil(options.decay_fraction * total))
    shape = _SHAPES[options.decay_shape]

    def lr(step: int, base_lr: float) -> float:
        floor = min(args.min_lr, base_lr)
        if step < warmup:
            return base_lr * (step + 1) / warmup
        if step < decay_start:
            return base_lr
        progress = min((step - decay_start) / max(total - decay_start, 1), 1.0)
        return floor + (base_lr - floor) * shape(progress)

    return lr
