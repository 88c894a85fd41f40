"""Checks the template's specs declare (``PluginSpec.checks``): run with every other validation of a run."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["check_warmup_stable_decay"]


def check_warmup_stable_decay(config: Any) -> list[str]:
    """``warmup_stable_decay`` needs room for its decay after the warmup."""
    args, options = config.training, config.plugins["warmup_stable_decay"]
    total = args.lr_decay_iters if args.lr_decay_iters is not None else args.train_iters
    decay = math.ceil(options.decay_fraction * total)
    if args.lr_warmup_iters > total - decay:
        return [f"--lr-decay-style warmup_stable_decay: --lr-warmup-iters {args.lr_warmup_iters} overlaps the final "
                f"decay (the last {decay} of {total} steps, plugins.warmup_stable_decay.decay_fraction="
                f"{options.decay_fraction}); lower --lr-warmup-iters or the decay fraction"]
    return []
