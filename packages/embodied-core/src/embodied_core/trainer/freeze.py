"""``--freeze-modules``: frozen parameters and modules that stay in eval mode.

A frozen module gets ``requires_grad=False`` on all its parameters and is pinned to eval mode: its
``train()`` is replaced on the instance so the ``model.train()`` the trainer calls every step leaves it
(dropout off, norm statistics fixed) in eval mode, without an extra pass over the modules per step.
"""

from __future__ import annotations

import logging
import types

from torch import nn

from embodied_core.errors import ConfigError, did_you_mean

__all__ = ["FreezeReport", "freeze_modules", "parse_module_paths"]

logger = logging.getLogger("embodied.train")


class FreezeReport:
    """Counts of trainable and frozen parameters after freezing."""

    def __init__(self, model: nn.Module, frozen_paths: list[str]) -> None:
        self.frozen_paths = frozen_paths
        self.trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        self.frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)

    def __str__(self) -> str:
        total = self.trainable + self.frozen
        share = 100.0 * self.frozen / total if total else 0.0
        where = f" ({', '.join(self.frozen_paths)})" if self.frozen_paths else ""
        return f"parameters: {self.trainable:,} trainable, {self.frozen:,} frozen{where} = {share:.1f}% frozen"


def parse_module_paths(text: str) -> list[str]:
    """``"a.b, c"`` -> ``["a.b", "c"]`` (empty items dropped)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _eval_only_train(self: nn.Module, mode: bool = True) -> nn.Module:
    """Replacement ``train`` of a frozen module: always eval mode (recursing into its children)."""
    return nn.Module.train(self, False)


def freeze_modules(model: nn.Module, paths: list[str]) -> FreezeReport:
    """Freezes the modules at ``paths`` (``named_modules()`` names; ``""`` is not allowed).

    Raises:
        ConfigError: a path names no module (all unmatched paths are listed, with the closest match).
    """
    modules = dict(model.named_modules())
    missing = [p for p in paths if p not in modules or p == ""]
    if missing:
        candidates = [name for name in modules if name]
        raise ConfigError([f"--freeze-modules {p!r}: no module has this path{did_you_mean(p, candidates)}"
                           for p in missing], source="--freeze-modules")
    for path in paths:
        module = modules[path]
        for param in module.parameters():
            param.requires_grad_(False)
        module.train = types.MethodType(_eval_only_train, module)  # type: ignore[method-assign]
        module.eval()
    return FreezeReport(model, paths)
