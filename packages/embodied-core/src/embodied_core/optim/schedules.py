"""LR schedules (group ``embodied.lr_schedulers``): the ten styles of ``--lr-decay-style``.

A schedule factory is ``build(args) -> LrFn`` where ``LrFn(step, base_lr) -> lr`` gives the learning rate
of a parameter group whose peak LR is ``base_lr`` at update ``step`` (0-based). The trainer wraps it in a
``LambdaLR`` per group, so ``--lr-group`` groups follow the same shape scaled to their own peak.

Notation used in every docstring below:

- ``s``: the update step (0-based); ``W``: ``--lr-warmup-iters``; ``D``: ``--lr-decay-iters`` (default
  ``--train-iters``); ``base``: the group's peak LR;
- ``m = min(--min-lr, base)``: the absolute floor (never above the group's own peak, so a group with
  ``lr=0`` stays at 0);
- ``warm(s) = base * (s + 1) / W`` for ``s < W`` (the first update already moves; the peak is reached at
  ``s = W - 1``);
- ``p = clamp((s - W) / max(D - W, 1), 0, 1)``: decay progress. Because ``p`` is clamped, every
  non-cyclic schedule holds its end value for ``s >= D`` and never climbs back up.

Where ``--min-lr`` applies: cosine_with_min_lr and cosine_warmup_with_min_lr. polynomial ends at ``--lr-end``
and lambda_linear is shaped by its ``--lambda-f-*`` factors (LoongForge's flags). linear, cosine and
cosine_with_restarts decay to 0 and inverse_sqrt has no floor, as in their usual definitions (transformers'
``get_scheduler``); pick a ``*_min_lr`` style for a floor.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from embodied_core.config.training_args import TrainingArgs

__all__ = [
    "LrFn",
    "build_constant",
    "build_constant_with_warmup",
    "build_cosine",
    "build_cosine_warmup_with_min_lr",
    "build_cosine_with_min_lr",
    "build_cosine_with_restarts",
    "build_inverse_sqrt",
    "build_lambda_linear",
    "build_linear",
    "build_polynomial",
    "decay_iters",
    "warmup_factor",
]

LrFn = Callable[[int, float], float]

logger = logging.getLogger("embodied.train")


def decay_iters(args: TrainingArgs) -> int:
    """``--lr-decay-iters``, defaulting to ``--train-iters``."""
    return args.lr_decay_iters if args.lr_decay_iters is not None else args.train_iters


def warmup_factor(step: int, warmup: int) -> float:
    """Linear warmup ``(step + 1) / warmup`` for ``step < warmup``, else 1."""
    return (step + 1) / warmup if step < warmup else 1.0


def _progress(step: int, warmup: int, total: int) -> float:
    return min(max((step - warmup) / max(total - warmup, 1), 0.0), 1.0)


def _floor(args: TrainingArgs, base_lr: float) -> float:
    return min(args.min_lr, base_lr)


def _warn_if_run_ends_in_warmup(args: TrainingArgs) -> None:
    if args.lr_warmup_iters >= decay_iters(args) and args.lr_warmup_iters > 0:
        logger.warning("--lr-warmup-iters %d >= decay length %d (--lr-decay-iters, default --train-iters): the LR "
                       "never leaves warmup; lower --lr-warmup-iters", args.lr_warmup_iters, decay_iters(args))


def _with_warmup(args: TrainingArgs, decay: Callable[[float, float], float]) -> LrFn:
    """Linear warmup, then ``decay(p, base)``."""
    warmup, total = args.lr_warmup_iters, decay_iters(args)
    _warn_if_run_ends_in_warmup(args)

    def lr_at(step: int, base_lr: float) -> float:
        if step < warmup:
            return base_lr * warmup_factor(step, warmup)
        return decay(_progress(step, warmup, total), base_lr)

    return lr_at


def build_linear(args: TrainingArgs) -> LrFn:
    """Warmup, then linear decay to 0: ``lr = warm(s)`` for ``s < W``, else ``base * (1 - p)``."""
    return _with_warmup(args, lambda p, base: base * (1.0 - p))


def build_cosine(args: TrainingArgs) -> LrFn:
    """Warmup, then half a cosine to 0: ``lr = base * 0.5 * (1 + cos(pi * p))`` after warmup."""
    return _with_warmup(args, lambda p, base: base * 0.5 * (1.0 + math.cos(math.pi * p)))


def build_cosine_with_restarts(args: TrainingArgs) -> LrFn:
    """Warmup, then ``C = --lr-num-cycles`` hard-restart cosine cycles down to 0 over the decay span:

    ``lr = base * 0.5 * (1 + cos(pi * frac(C * p)))`` for ``p < 1``; ``lr = 0`` for ``p = 1`` (``s >= D``),
    so the LR does not restart past the end. ``C = 1`` equals ``cosine``.
    """
    cycles = args.lr_num_cycles

    def decay(p: float, base: float) -> float:
        if p >= 1.0:
            return 0.0
        return base * 0.5 * (1.0 + math.cos(math.pi * ((cycles * p) % 1.0)))

    return _with_warmup(args, decay)


def build_polynomial(args: TrainingArgs) -> LrFn:
    """Warmup, then polynomial decay with power ``P = --lr-decay-power`` (alias ``--polynomial-power``) to
    ``e = min(--lr-end, base)``:

    ``lr = (base - e) * (1 - p) ** P + e`` after warmup (``P = 1`` is linear decay to ``--lr-end``), as
    transformers' ``get_polynomial_decay_schedule_with_warmup``.
    """
    power = args.lr_decay_power

    def decay(p: float, base: float) -> float:
        low = min(args.lr_end, base)
        return (base - low) * (1.0 - p) ** power + low

    return _with_warmup(args, decay)


def build_constant(args: TrainingArgs) -> LrFn:
    """``lr = base`` at every step (no warmup: ``--lr-warmup-iters`` is ignored; use constant_with_warmup)."""
    if args.lr_warmup_iters > 0:
        logger.warning("--lr-decay-style constant ignores --lr-warmup-iters %d; use constant_with_warmup for a "
                       "warmup", args.lr_warmup_iters)
    return lambda step, base_lr: base_lr


def build_constant_with_warmup(args: TrainingArgs) -> LrFn:
    """``lr = warm(s)`` for ``s < W``, then ``base``."""
    return _with_warmup(args, lambda p, base: base)


def build_inverse_sqrt(args: TrainingArgs) -> LrFn:
    """Warmup, then inverse square-root decay, held once the decay span ends:

    ``lr = base * sqrt(W' / (min(s, D) - W + W'))`` for ``s >= W`` with ``W' = max(W, 1)``, so
    ``lr(W) = base`` and ``lr`` keeps ``lr(D)`` for ``s > D``. No ``--min-lr`` floor.
    """
    warmup, total = args.lr_warmup_iters, decay_iters(args)
    timescale = max(warmup, 1)
    _warn_if_run_ends_in_warmup(args)

    def lr_at(step: int, base_lr: float) -> float:
        if step < warmup:
            return base_lr * warmup_factor(step, warmup)
        return base_lr * math.sqrt(timescale / (min(step, total) - warmup + timescale))

    return lr_at


def build_cosine_with_min_lr(args: TrainingArgs) -> LrFn:
    """Warmup from 0, then half a cosine down to the floor ``m``:

    ``lr = m + (base - m) * 0.5 * (1 + cos(pi * p))`` after warmup; ``lr = m`` for ``s >= D``.
    """

    def decay(p: float, base: float) -> float:
        low = _floor(args, base)
        return low + (base - low) * 0.5 * (1.0 + math.cos(math.pi * p))

    return _with_warmup(args, decay)


def build_cosine_warmup_with_min_lr(args: TrainingArgs) -> LrFn:
    """Like cosine_with_min_lr, but the warmup starts at the floor instead of 0:

    ``lr = m + (base - m) * (s + 1) / W`` for ``s < W``; then ``m + (base - m) * 0.5 * (1 + cos(pi * p))``.
    """
    warmup, total = args.lr_warmup_iters, decay_iters(args)
    _warn_if_run_ends_in_warmup(args)

    def lr_at(step: int, base_lr: float) -> float:
        low = _floor(args, base_lr)
        if step < warmup:
            return low + (base_lr - low) * warmup_factor(step, warmup)
        return low + (base_lr - low) * 0.5 * (1.0 + math.cos(math.pi * _progress(step, warmup, total)))

    return lr_at


def build_lambda_linear(args: TrainingArgs) -> LrFn:
    """LoongForge's ``lambda_linear``: repeating cycles of ``C = --lambda-cycle-length`` updates, each a linear
    warmup over ``W = --lr-warmup-iters`` updates from factor ``f_start`` to ``f_max``, then a linear decay to
    ``f_min`` at the cycle's end (``--lambda-f-start``, ``--lambda-f-max``, ``--lambda-f-min``):

    with ``n = s mod C``: ``f = (f_max - f_start) * n / W + f_start`` for ``n < W``, else
    ``f = f_min + (f_max - f_min) * (C - n) / (C - W)``; ``lr = base * f``. This is the one schedule that rises
    again after a cycle, by design; ``--lr-decay-iters`` and ``--min-lr`` do not apply to it.
    """
    warmup, cycle = args.lr_warmup_iters, args.lambda_cycle_length
    f_start, f_max, f_min = args.lambda_f_start, args.lambda_f_max, args.lambda_f_min
    if warmup >= cycle:
        raise ValueError(f"lambda_linear: --lr-warmup-iters {warmup} must be shorter than --lambda-cycle-length "
                         f"{cycle}")

    def lr_at(step: int, base_lr: float) -> float:
        n = step % cycle
        if n < warmup:
            return base_lr * ((f_max - f_start) * n / warmup + f_start)
        return base_lr * (f_min + (f_max - f_min) * (cycle - n) / (cycle - warmup))

    return lr_at
