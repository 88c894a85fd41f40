"""Which modules get adapters (``--lora-target-modules`` or the model's ``default_lora_targets()``) and which are
trained in full (``--lora-modules-to-save``): resolved to exact module paths before PEFT sees them.

Resolving first lets every mistake be reported together, naming the flag, the pattern and the closest module
name, and lets the paths handed to PEFT be exact: PEFT matches a name list by suffix, so a full path that is
also the tail of another module's path would adapt that module too (then a regular expression is used).
"""

from __future__ import annotations

import fnmatch
import re

from torch import nn

from embodied_core.errors import ConfigError, did_you_mean
from embodied_core.lora.options import TargetSpec

__all__ = ["ADAPTABLE_TYPES", "peft_target_modules", "resolve_modules_to_save", "resolve_targets", "split_frozen",
           "target_problems"]

ADAPTABLE_TYPES: tuple[type[nn.Module], ...] = (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d, nn.Conv3d)
"""Layer types a LoRA adapter wraps (PEFT's LoRA layers for torch modules)."""
_SHOW = 5


def _suffix_match(path: str, name: str) -> bool:
    return path == name or path.endswith("." + name)


def _suffixes(paths: list[str]) -> set[str]:
    """Every dotted tail of every path (``a.b.c`` -> ``c``, ``b.c``, ``a.b.c``): the names a user may write."""
    out: set[str] = set()
    for path in paths:
        parts = path.split(".")
        out.update(".".join(parts[i:]) for i in range(len(parts)))
    return out


def _shown(items: list[str]) -> str:
    return ", ".join(items[:_SHOW]) + (f" ... and {len(items) - _SHOW} more" if len(items) > _SHOW else "")


def _match(spec: TargetSpec, paths: list[str], declared: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``(matched paths, problems)`` of ``spec`` over ``paths``; every name or pattern must match something."""
    problems: list[str] = []
    flag = "--lora-target-modules"
    if spec.kind == "regex":
        regex = re.compile(spec.values[0])
        matched = [p for p in paths if regex.fullmatch(p)]
        if not matched:
            problems.append(f"{flag} '{spec.values[0]}': the regular expression matches no module path (it must match "
                            f"whole paths, e.g. {paths[-1]!r})")
        return matched, problems
    if spec.kind == "names":
        patterns, matches = spec.values, _suffix_match
    else:
        patterns, matches = declared, fnmatch.fnmatchcase
        if not declared:
            return [], ["--use-lora: the model declares no default_lora_targets(); name the layers with "
                        "--lora-target-modules (module names or a regular expression)"]
    matched = []
    for pattern in patterns:
        hits = [p for p in paths if matches(p, pattern)]
        if not hits:
            where = flag if spec.kind == "names" else "default_lora_targets()"
            problems.append(f"{where} {pattern!r}: no module has this name{did_you_mean(pattern, _suffixes(paths))}")
        matched.extend(h for h in hits if h not in matched)
    return matched, problems


def resolve_targets(model: nn.Module, spec: TargetSpec) -> list[str]:
    """Module paths of ``model`` that get adapters, in ``named_modules()`` order.

    Raises:
        ConfigError: a name or pattern matches nothing, the model declares no default targets, or a matched module
            is not a Linear, Conv or Embedding layer (all problems listed).
    """
    targets, problems = target_problems(model, spec)
    if problems:
        raise ConfigError(problems, source="--use-lora")
    return targets


def target_problems(model: nn.Module, spec: TargetSpec) -> tuple[list[str], list[str]]:
    """``(adaptable module paths matched, problems)``: what :func:`resolve_targets` checks, without raising."""
    modules = {name: module for name, module in model.named_modules() if name}
    declared = tuple(model.default_lora_targets()) if spec.kind == "default" else ()
    matched, problems = _match(spec, list(modules), declared)
    unsupported = [f"{p} ({type(modules[p]).__name__})" for p in matched if not isinstance(modules[p], ADAPTABLE_TYPES)]
    if unsupported:
        problems.append(f"{spec.describe()}: matches {len(unsupported)} module(s) LoRA cannot adapt: "
                        f"{_shown(unsupported)}; only {', '.join(t.__name__ for t in ADAPTABLE_TYPES)} layers can "
                        "take an adapter (name the projections inside, or anchor the regular expression)")
    order = {name: i for i, name in enumerate(modules)}
    adaptable = [p for p in matched if isinstance(modules[p], ADAPTABLE_TYPES)]
    return sorted(adaptable, key=order.__getitem__), problems


def split_frozen(model: nn.Module, targets: list[str]) -> tuple[list[str], list[str]]:
    """``(targets, skipped)``: layers the model itself froze (no loss reaches them, e.g. pi05's last VLM projections)
    get no adapter, which could never receive a gradient (DDP would wait for it, the optimizer keep state)."""
    modules = dict(model.named_modules())
    frozen = {t for t in targets if not any(p.requires_grad for p in modules[t].parameters())}
    return [t for t in targets if t not in frozen], [t for t in targets if t in frozen]


def resolve_modules_to_save(model: nn.Module, names: tuple[str, ...], targets: list[str]) -> list[str]:
    """Module paths for ``--lora-modules-to-save`` (each name: a path or its last dotted parts).

    Raises:
        ConfigError: a name matches nothing, a module overlaps an adapter target, or PEFT's suffix matching would
            also pick up other modules when the adapters are loaded again.
    """
    paths = [name for name, _ in model.named_modules() if name]
    problems: list[str] = []
    chosen: list[str] = []
    for name in names:
        hits = [p for p in paths if _suffix_match(p, name)]
        if not hits:
            problems.append(f"--lora-modules-to-save {name!r}: no module has this name"
                            f"{did_you_mean(name, _suffixes(paths))}")
        chosen.extend(h for h in hits if h not in chosen)
    for path in chosen:
        overlap = [t for t in targets if t == path or t.startswith(path + ".") or path.startswith(t + ".")]
        if overlap:
            problems.append(f"--lora-modules-to-save {path!r}: overlaps the adapter target(s) {_shown(overlap)}; a "
                            "module is either adapted or trained in full")
        # PEFT wraps every module whose path ends with a modules_to_save entry (plain string suffix)
        extra = [p for p in paths if p != path and p.endswith(path) and not p.startswith(path + ".")
                 and p not in chosen]
        if extra:
            problems.append(f"--lora-modules-to-save {path!r}: PEFT would also train {_shown(extra)} (it matches names "
                            "by suffix); name a longer path")
    if problems:
        raise ConfigError(problems, source="--use-lora")
    return chosen


def peft_target_modules(model: nn.Module, targets: list[str]) -> list[str] | str:
    """What to pass as PEFT's ``target_modules`` so that it adapts exactly ``targets``: the paths themselves when no
    other module's path ends with one of them, else an anchored regular expression of the paths."""
    chosen = set(targets)
    suffixes = tuple("." + t for t in targets)
    ambiguous = any(name not in chosen and name.endswith(suffixes) for name, _ in model.named_modules())
    if ambiguous:
        return "^(?:" + "|".join(re.escape(t) for t in targets) + ")$"
    return list(targets)

