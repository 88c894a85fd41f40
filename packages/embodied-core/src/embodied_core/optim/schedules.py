"""LR schedules (group ``embodied.lr_schedulers``).

A schedule factory is ``build(args) -> LrFn`` where ``LrFn(step, base_lr) -> lr`` gives the learning rate
of a parameter group whose peak LR is ``base_lr`` at update ``step`` (0-based). The trainer wraps it in a
``LambdaLR`` per group. ``--min-lr`` is an absolute floor; past the decay length the LR stays at its end
value, never climbing back up.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from embodied_core.config.training_args import TrainingArgs

__all__ = ["LrFn", "build_cosine_with_min_lr", "decay_iters", "warmup_factor"]

LrFn = Callable[[int, float], float]


def decay_iters(args: TrainingArgs) -> int:
    """``--lr-decay-iters``, defaulting to ``--train-iters``."""
    return args.lr_decay_iters if args.lr_decay_iters is not None else args.train_iters


def warmup_factor(step: int, warmup: int) -> float:
    """Linear warmup ``(step + 1) / warmup`` for ``step < warmup`` (the first update already has a
    non-zero LR and the peak is reached at ``step = warmup - 1``), else 1."""
    return (step + 1) / warmup if step < warmup else 1.0


def build_cosine_with_min_lr(args: TrainingArgs) -> LrFn:
    """Linear warmup to ``base_lr``, then half a cosine down to ``min_lr``:

    ``lr(s) = min_lr + (base_lr - min_lr) * 0.5 * (1 + cos(pi * p))`` with
    ``p = clamp((s - warmup) / (decay_iters - warmup), 0, 1)``; ``lr(s) = min_lr`` for ``s >= decay_iters``.
    """
    warmup, total, floor = args.lr_warmup_iters, decay_iters(args), args.min_lr

    def lr_at(step: int, base_lr: float) -> float:
        if step < warmup:
            return base_lr * warmup_factor(step, warmup)
        span = max(total - warmup, 1)
        progress = min(max((step - warmup) / span, 0.0), 1.0)
        low = min(floor, base_lr)
        return low + (base_lr - low) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return lr_at
