"""Optimizer factories (group ``embodied.optimizers``).

Each factory is ``build(param_groups, args) -> torch.optim.Optimizer``; ``param_groups`` carry their own
``lr`` and ``weight_decay``.
"""

from __future__ import annotations

from typing import Any

import torch

from embodied_core.config.training_args import TrainingArgs

__all__ = ["build_adam", "build_adamw", "build_sgd"]


def build_adamw(param_groups: list[dict[str, Any]], args: TrainingArgs) -> torch.optim.Optimizer:
    """``torch.optim.AdamW`` (foreach implementation)."""
    return torch.optim.AdamW(param_groups, lr=args.lr_base, betas=(args.adam_beta1, args.adam_beta2),
                             eps=args.adam_eps, weight_decay=args.weight_decay)


def build_adam(param_groups: list[dict[str, Any]], args: TrainingArgs) -> torch.optim.Optimizer:
    """``torch.optim.Adam``; weight decay is L2 (coupled), as in torch."""
    return torch.optim.Adam(param_groups, lr=args.lr_base, betas=(args.adam_beta1, args.adam_beta2),
                            eps=args.adam_eps, weight_decay=args.weight_decay)


def build_sgd(param_groups: list[dict[str, Any]], args: TrainingArgs) -> torch.optim.Optimizer:
    """``torch.optim.SGD`` with ``--sgd-momentum``."""
    return torch.optim.SGD(param_groups, lr=args.lr_base, momentum=args.sgd_momentum,
                           weight_decay=args.weight_decay)
