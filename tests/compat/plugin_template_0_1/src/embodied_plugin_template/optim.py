"""The Lion optimizer (Chen et al., "Symbolic Discovery of Optimization Algorithms", 2023).

Update: ``c = b1 * m + (1 - b1) * g``; ``p -= lr * (sign(c) + wd * p)``; ``m = b2 * m + (1 - b2) * g``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from embodied_core import TrainingArgs


class Lion(torch.optim.Optimizer):
    """Lion with decoupled weight decay."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-4, betas: tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0.0) -> None:
        if lr < 0:
            raise ValueError(f"Lion: lr must be >= 0 (got {lr})")
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["exp_avg"] = torch.zeros_like(param)
                exp_avg = state["exp_avg"]
                update = exp_avg.mul(beta1).add_(param.grad, alpha=1 - beta1).sign_()
                param.mul_(1 - group["lr"] * group["weight_decay"]).add_(update, alpha=-group["lr"])
                exp_avg.mul_(beta2).add_(param.grad, alpha=1 - beta2)
        return loss


def build_lion(param_groups: list[dict[str, Any]], args: TrainingArgs) -> Lion:
    """Factory named by the ``Lion`` spec; betas from --adam-beta1 / --adam-beta2."""
    return Lion(param_groups, lr=args.lr_base, betas=(args.adam_beta1, args.adam_beta2),
                weight_decay=args.weight_decay)
