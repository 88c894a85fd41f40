"""Activation checkpointing: modules that drop their activations in forward and recompute them in backward.

One mechanism serves ``--activation-checkpoint-module-patterns`` / ``--activation-checkpoint-skip-modules`` and
the models' own ``gradient_checkpointing`` fields: torch's composable, non-reentrant checkpoint
(``torch.distributed._composable.checkpoint``), which works through forward hooks. It changes neither the
module's class nor its parameter names, so FSDP still finds a checkpointed block as its unit
(``ModelPlugin.fsdp_units()`` / ``--fsdp-wrap-modules``), state dicts keep their keys and ``--lr-group`` /
``--freeze-modules`` paths stay valid. The trainer applies it after ``--freeze-modules`` and before DDP/FSDP
wrapping; a model applies it to its own blocks when built with ``gradient_checkpointing`` on
(:func:`set_activation_checkpointing`).

Pattern syntax: dotted ``named_modules()`` paths, ``*`` matching exactly one path segment (``layers.*``
selects ``layers.0``, ``layers.1``, ... but not ``layers.0.mlp``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs
from torch import nn
from torch.distributed._composable import _get_registry, checkpoint

from embodied_core.errors import ConfigError, did_you_mean

__all__ = ["CheckpointingReport", "apply_activation_checkpointing", "is_checkpointed", "match_module_patterns",
           "parse_module_patterns", "set_activation_checkpointing"]

_API = "checkpoint"
"""The name torch's composable-API registry gives the checkpoint API on a module."""


def parse_module_patterns(text: str | None) -> list[str]:
    """``"layers.*, vision_tower"`` -> ``["layers.*", "vision_tower"]``."""
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(r"\.".join("[^.]+" if part == "*" else re.escape(part) for part in pattern.split(".")))


def match_module_patterns(model: nn.Module, patterns: Sequence[str], *, flag: str,
                          among: Sequence[str] | None = None) -> list[str]:
    """Names of the modules of ``model`` (or of ``among``) that any of ``patterns`` matches, in model order.

    Raises:
        ConfigError: a pattern that matches nothing, naming the flag, the pattern and similar paths.
    """
    names = [name for name, _ in model.named_modules() if name] if among is None else list(among)
    matched: set[str] = set()
    problems = []
    for pattern in patterns:
        hits = {name for name in names if _regex(pattern).fullmatch(name)}
        if not hits:
            depth = pattern.count(".")
            near = sorted({n for n in names if n.count(".") == depth})[:6]
            where = "among the modules selected for checkpointing" if among is not None else "in the model"
            problems.append(f"{flag}: {pattern!r} matches no module {where}{did_you_mean(pattern, names)}"
                            + (f" (paths at that depth: {', '.join(near)})" if near else ""))
        matched |= hits
    if problems:
        raise ConfigError(problems)
    return [name for name in names if name in matched]


def is_checkpointed(module: nn.Module) -> bool:
    """Whether ``module`` recomputes its activations in backward (its checkpoint hooks are on)."""
    return _API in (_get_registry(module) or {}) and checkpoint.state(module).enable_hook


def set_activation_checkpointing(module: nn.Module, enabled: bool) -> None:
    """Turns non-reentrant activation checkpointing of ``module`` on or off (idempotent).

    Models call this for their own ``gradient_checkpointing`` field, so the flags and the field share one
    mechanism; the trainer's skip patterns can turn a model's own checkpointing off again.
    """
    if _API in (_get_registry(module) or {}):
        checkpoint.state(module).enable_hook = enabled
    elif enabled:
        checkpoint(module, use_reentrant=False)


@attrs.frozen
class CheckpointingReport:
    """What :func:`apply_activation_checkpointing` left checkpointed (``checkpointed``) and switched off."""

    checkpointed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    def __str__(self) -> str:
        if not self.checkpointed and not self.skipped:
            return "activation checkpointing: none"
        shown = ", ".join(self.checkpointed[:8]) + (f" ... ({len(self.checkpointed)})" if len(self.checkpointed) > 8
                                                     else "")
        return (f"activation checkpointing (non-reentrant) on {len(self.checkpointed)} module(s): {shown or 'none'}"
                + (f"; skipped: {', '.join(self.skipped)}" if self.skipped else ""))


def apply_activation_checkpointing(model: nn.Module, *, patterns: str | None, skip: str | None) -> CheckpointingReport:
    """Checkpoints the modules ``patterns`` selects, and those the model checkpoints itself, except ``skip``'s.

    Args:
        patterns: ``--activation-checkpoint-module-patterns``.
        skip: ``--activation-checkpoint-skip-modules``: patterns over the selected modules (the flag's and the
            model's own) whose checkpointing is left off.

    Raises:
        ConfigError: a pattern of either flag that matches nothing.
    """
    wanted = match_module_patterns(model, parse_module_patterns(patterns),
                                   flag="--activation-checkpoint-module-patterns")
    modules = dict(model.named_modules())
    own = [name for name, module in modules.items() if name and is_checkpointed(module)]
    selected = [name for name in modules if name in set(wanted) | set(own)]
    skipped = match_module_patterns(model, parse_module_patterns(skip), flag="--activation-checkpoint-skip-modules",
                                    among=selected) if skip else []
    for name in selected:
        set_activation_checkpointing(modules[name], name not in skipped)
    return CheckpointingReport(checkpointed=tuple(n for n in selected if n not in skipped), skipped=tuple(skipped))
