"""One key-map contract and one strict load report, used by every model's checkpoint code and by
``--pretrained-checkpoint``.

A :class:`KeyMap` declares how a source checkpoint's keys become the module's state-dict names:

1. each key is tried as it is and with each of ``strip_prefixes`` removed (lerobot's ``model.``);
2. ``renames``: regex patterns (full match) with a ``str.format`` template over the named groups, first
   match wins, each optionally with a tensor ``transform`` (a reshape, a transpose);
3. ``keep``: glob patterns of keys that already are target names (``("*",)``: every key, the identity map);
4. ``tied``: renames that fill a target only when no other key filled it (PaliGemma's ``lm_head`` for the
   embedding table); a tied source whose target was filled is listed as ignored;
5. ``ignored``: glob patterns of source keys dropped on purpose (listed in the report).

Anything else is *unexpected*; every module key not filled is *missing*; a tensor of another shape is
*mismatched*. Any of the three is an error unless an :class:`Allow` glob pattern covers it. One matching rule
everywhere: globs (``fnmatch``, case-sensitive) for ``keep`` / ``ignored`` / allow patterns, regexes only
where a rename needs groups.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import torch
from torch import nn

from embodied_core.checkpoint.shard_copy import copy_full_into
from embodied_core.errors import CheckpointError

__all__ = ["IDENTITY", "Allow", "KeyMap", "LoadReport", "Mismatch", "Rename", "compare_state", "load_state"]

_SHOW = 40

TensorTransform = Callable[[torch.Tensor], torch.Tensor]


def _matches(key: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)


@attrs.frozen
class Rename:
    """A source key pattern and the target name it becomes.

    Attributes:
        pattern: regex matched against the whole source key.
        template: the target name, ``str.format``-ted with the pattern's named groups.
        transform: applied to the tensor before the shape check and the copy (None: unchanged).
    """

    pattern: str
    template: str
    transform: TensorTransform | None = None
    _compiled: re.Pattern[str] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_compiled", re.compile(self.pattern))

    def apply(self, key: str) -> str | None:
        """The target name of ``key``, or None when the pattern does not match it."""
        match = self._compiled.fullmatch(key)
        return self.template.format(**match.groupdict()) if match else None


@attrs.frozen
class KeyMap:
    """A declared mapping from a checkpoint layout's keys to a module's state-dict names (see the module doc)."""

    strip_prefixes: tuple[str, ...] = ()
    renames: tuple[Rename, ...] = ()
    keep: tuple[str, ...] = ("*",)
    tied: tuple[Rename, ...] = ()
    ignored: tuple[str, ...] = ()

    def candidates(self, key: str) -> list[str]:
        """``key`` and its forms without each strippable prefix."""
        return [key, *(key[len(p):] for p in self.strip_prefixes if key.startswith(p))]

    def target(self, key: str) -> tuple[str, TensorTransform | None] | None:
        """``(target name, transform)`` of a source key through the renames or ``keep``; None if neither applies."""
        forms = self.candidates(key)
        for form in forms:
            for rename in self.renames:
                name = rename.apply(form)
                if name is not None:
                    return name, rename.transform
        for form in forms:
            if _matches(form, self.keep):
                return form, None
        return None

    def tie(self, key: str) -> tuple[str, TensorTransform | None] | None:
        """``(target, transform)`` when ``key`` is a tied source (fills its target only if nothing else did)."""
        for form in self.candidates(key):
            for rename in self.tied:
                name = rename.apply(form)
                if name is not None:
                    return name, rename.transform
        return None

    def is_ignored(self, key: str) -> bool:
        """True when ``key`` (or a stripped form) is dropped on purpose."""
        return any(_matches(form, self.ignored) for form in self.candidates(key))

    def rename_all(self, state: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
        """Applies renames / ``keep`` (and transforms) to a whole state dict: ``(mapped, keys no rule covers)``."""
        mapped: dict[str, torch.Tensor] = {}
        unmatched: list[str] = []
        for key, tensor in state.items():
            hit = self.target(key)
            if hit is None:
                unmatched.append(key)
                continue
            name, transform = hit
            mapped[name] = transform(tensor) if transform is not None else tensor
        return mapped, unmatched


IDENTITY = KeyMap()
"""Every key is already the module's name (embodied checkpoints, plain weight files)."""


@attrs.frozen
class Allow:
    """Differences that are reported but not an error (glob patterns).

    Attributes:
        missing: over the module's names.
        unexpected: over the checkpoint's keys.
        mismatched: over the module's names.
    """

    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()
    mismatched: tuple[str, ...] = ()


@attrs.frozen
class Mismatch:
    """A checkpoint tensor whose shape differs from the module's."""

    target: str
    source: str
    model_shape: tuple[int, ...]
    checkpoint_shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.target} (model {self.model_shape}, checkpoint {self.source} {self.checkpoint_shape})"


@attrs.define
class LoadReport:
    """What a checkpoint load did; ``ok`` when nothing missing, unexpected or mismatched remains.

    Attributes:
        loaded: module names filled from the checkpoint.
        missing: module names the checkpoint did not fill.
        unexpected: checkpoint keys no rule covers (or whose target the module lacks).
        mismatched: tensors of another shape than the module's.
        ignored: checkpoint keys dropped on purpose (``KeyMap.ignored``, tied sources not needed).
        tied: ``"<source> -> <target>"`` for targets filled from a tied source.
    """

    loaded: list[str] = attrs.Factory(list)
    missing: list[str] = attrs.Factory(list)
    unexpected: list[str] = attrs.Factory(list)
    mismatched: list[Mismatch] = attrs.Factory(list)
    ignored: list[str] = attrs.Factory(list)
    tied: list[str] = attrs.Factory(list)

    @property
    def ok(self) -> bool:
        """Whether every module key was filled with a tensor of the right shape and no key was left over."""
        return not (self.missing or self.unexpected or self.mismatched)

    def problems(self, allow: Allow = Allow()) -> list[str]:
        """One line per difference not covered by ``allow``: ``missing: k``, ``unexpected: k``,
        ``shape mismatch: target (model shape, checkpoint key shape)``."""
        return ([f"missing: {k}" for k in self.missing if not _matches(k, allow.missing)]
                + [f"unexpected: {k}" for k in self.unexpected if not _matches(k, allow.unexpected)]
                + [f"shape mismatch: {m}" for m in self.mismatched if not _matches(m.target, allow.mismatched)])

    def describe(self, limit: int = 10) -> str:
        """One-line summary: the first ``limit`` keys of each kind of difference, or ``all keys match``."""
        parts = []
        mismatched = [f"{m.target}: checkpoint {m.checkpoint_shape} vs model {m.model_shape}" for m in self.mismatched]
        for title, keys in (("missing", self.missing), ("unexpected", self.unexpected),
                            ("shape-mismatched", mismatched)):
            if keys:
                more = f" ... and {len(keys) - limit} more" if len(keys) > limit else ""
                parts.append(f"{len(keys)} {title} keys: {', '.join(keys[:limit])}{more}")
        return "; ".join(parts) or "all keys match"

    def __str__(self) -> str:
        extra = [f"{len(v)} {k}" for k, v in (("ignored", self.ignored), ("tied", self.tied)) if v]
        return f"loaded {len(self.loaded)} tensors ({self.describe()}{'; ' + ', '.join(extra) if extra else ''})"


def _match(targets: Mapping[str, torch.Tensor], items: Iterable[tuple[str, torch.Tensor]], keymap: KeyMap,
           copy: bool) -> LoadReport:
    report = LoadReport()
    filled: set[str] = set()
    tied: dict[str, tuple[str, torch.Tensor, TensorTransform | None]] = {}

    def place(target: str, key: str, tensor: torch.Tensor, transform: TensorTransform | None) -> None:
        param = targets.get(target)
        if param is None:
            report.unexpected.append(key)
            return
        if transform is not None:
            tensor = transform(tensor)
        if tuple(param.shape) != tuple(tensor.shape):
            report.mismatched.append(Mismatch(target, key, tuple(param.shape), tuple(tensor.shape)))
            return
        if target in filled:
            raise CheckpointError(f"checkpoint maps two keys onto {target} (the second is {key}); it mixes layouts")
        if copy:
            copy_full_into(param, tensor, name=target)  # this rank's shard only under FSDP
        filled.add(target)
        report.loaded.append(target)

    with torch.no_grad():
        for key, tensor in items:
            hit = keymap.target(key)
            if hit is not None:
                place(hit[0], key, tensor, hit[1])
                continue
            if keymap.is_ignored(key):
                report.ignored.append(key)
                continue
            tie = keymap.tie(key)
            if tie is not None:
                tied[tie[0]] = (key, tensor, tie[1])
                continue
            report.unexpected.append(key)
        for target, (key, tensor, transform) in tied.items():
            if target in filled:
                report.ignored.append(key)  # the checkpoint has both; the untied tensor wins
            else:
                report.tied.append(f"{key} -> {target}")
                place(target, key, tensor, transform)
    mismatched = {m.target for m in report.mismatched}
    report.missing = sorted(k for k in targets if k not in filled and k not in mismatched)
    return report


def compare_state(module: nn.Module, items: Iterable[tuple[str, torch.Tensor]] | Mapping[str, torch.Tensor],
                  keymap: KeyMap = IDENTITY) -> LoadReport:
    """The report of loading ``items`` into ``module`` through ``keymap``, without copying anything."""
    pairs = items.items() if isinstance(items, Mapping) else items
    return _match(module.state_dict(), pairs, keymap, copy=False)


def load_state(module: nn.Module, items: Iterable[tuple[str, torch.Tensor]] | Mapping[str, torch.Tensor],
               keymap: KeyMap = IDENTITY, *, source: Any, allow: Allow = Allow(), hint: str = "") -> LoadReport:
    """Copies ``items`` (a state dict, or ``(key, tensor)`` pairs read lazily) into ``module`` through ``keymap``,
    casting to each tensor's dtype, and returns the report.

    Args:
        source: what is loaded (a path), named in the error.
        allow: differences that are reported but not an error.
        hint: a sentence appended to the error (how to fix a typical mismatch).

    Raises:
        CheckpointError: listing every missing, unexpected or shape-mismatched key not covered by ``allow``
            (tensors already copied stay copied: the caller must not use the module after the error).
    """
    pairs = items.items() if isinstance(items, Mapping) else items
    report = _match(module.state_dict(keep_vars=True), pairs, keymap, copy=True)
    problems = report.problems(allow)
    if problems:
        shown = "\n  ".join(problems[:_SHOW]) + (f"\n  ... ({len(problems) - _SHOW} more)"
                                                 if len(problems) > _SHOW else "")
        raise CheckpointError(f"{source} does not fit {type(module).__name__} ({len(problems)} problem(s), strict "
                              f"load):\n  {shown}" + (f"\n{hint}" if hint else ""))
    return report
