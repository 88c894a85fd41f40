"""Optimizer parameter groups from ``--lr-group`` and ``--weight-decay-grouping``.

``--lr-group "vision.blocks.0=1e-6,vision=1e-5"`` assigns each trainable parameter to the *first* listed
path that contains it (a module path of ``named_modules()``, or a parameter name), so a child must come
before its parent; parameters no path contains use ``--lr-base``. A path that claims no parameter is an
error: either it names nothing, or an earlier (parent) path already took all of its parameters.

``--weight-decay-grouping bias_norm`` exempts biases, the weights of normalization layers and the names
the model returns from ``no_weight_decay()`` (parameter names or module paths) from weight decay.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from torch import nn

from embodied_core.config.training_args import TrainingArgs
from embodied_core.config.validate import parse_lr_groups
from embodied_core.errors import ConfigError, did_you_mean

__all__ = ["build_param_groups", "format_group_table", "no_decay_names"]

logger = logging.getLogger("embodied.train")

_NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.LayerNorm, nn.GroupNorm, nn.LocalResponseNorm, nn.RMSNorm, nn.modules.batchnorm._NormBase,
)
DEFAULT_GROUP = "default"


def _contains(path: str, name: str) -> bool:
    return name == path or name.startswith(path + ".")


def _is_norm(module: nn.Module) -> bool:
    # Models often bring their own RMSNorm/LayerNorm classes: the class name is the practical signal.
    return isinstance(module, _NORM_TYPES) or "norm" in type(module).__name__.lower()


def no_decay_names(model: nn.Module) -> set[str]:
    """Names of parameters exempt from weight decay under ``bias_norm``; ``model`` implements the model-plugin
    protocol (:class:`embodied_core.protocols.ModelPlugin`), whose ``no_weight_decay()`` names are exempt too."""
    exempt: set[str] = set()
    for module_name, module in model.named_modules():
        for param_name, _ in module.named_parameters(recurse=False):
            full = f"{module_name}.{param_name}" if module_name else param_name
            if param_name == "bias" or param_name.endswith("_bias") or _is_norm(module):
                exempt.add(full)
    names = [name for name, _ in model.named_parameters()]
    for entry in sorted(model.no_weight_decay()):
        matched = [n for n in names if _contains(entry, n)]
        if not matched:
            logger.warning("%s.no_weight_decay() names %r, which matches no parameter", type(model).__name__, entry)
        exempt.update(matched)
    return exempt


def _assign_lr_groups(named: list[tuple[str, nn.Parameter]], spec: list[tuple[str, float]],
                      model: nn.Module) -> dict[str, str]:
    """Parameter name -> the ``--lr-group`` path that claims it (absent: the default group)."""
    module_paths = {name for name, _ in model.named_modules() if name}
    all_names = [name for name, _ in model.named_parameters()]
    owner: dict[str, str] = {}
    problems = []
    for path, _lr in spec:
        exists = path in module_paths or any(_contains(path, n) for n in all_names)
        if not exists:
            candidates = sorted(module_paths | set(all_names))
            problems.append(f"--lr-group {path!r}: no module or parameter has this path"
                            f"{did_you_mean(path, candidates)}")
            continue
        claimed = [name for name, _ in named if _contains(path, name) and name not in owner]
        inside = [name for name, _ in named if _contains(path, name)]
        if not claimed and inside:
            earlier = sorted({owner[n] for n in inside})
            problems.append(f"--lr-group {path!r}: every parameter under it is already claimed by the earlier "
                            f"entry {', '.join(map(repr, earlier))}; list the child before its parent")
        elif not claimed:
            logger.warning("--lr-group %r: the module has no trainable parameters (frozen?)", path)
        owner.update(dict.fromkeys(claimed, path))
    if problems:
        raise ConfigError(problems, source="--lr-group")
    return owner


def build_param_groups(model: nn.Module, args: TrainingArgs) -> list[dict[str, Any]]:
    """Trainable parameters in optimizer groups, each with ``params``, ``lr``, ``weight_decay`` and ``name``.

    Groups are keyed by (lr path, decay or not); empty groups are dropped. Frozen parameters
    (``requires_grad=False``) are left out.

    Raises:
        ConfigError: a ``--lr-group`` path matches nothing, or only parameters an earlier path claimed.
    """
    spec = parse_lr_groups(args.lr_group)
    lrs = dict(spec)
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    owner = _assign_lr_groups(named, spec, model)
    exempt = no_decay_names(model) if args.weight_decay_grouping == "bias_norm" else set()
    groups: dict[tuple[str, bool], dict[str, Any]] = {}
    for path in [*lrs, DEFAULT_GROUP]:
        for decay in (True, False):
            groups[(path, decay)] = {"params": [], "param_names": [], "lr": lrs.get(path, args.lr_base),
                                     "weight_decay": args.weight_decay if decay else 0.0,
                                     "name": path if decay else f"{path} (no decay)"}
    for name, param in named:
        group = groups[(owner.get(name, DEFAULT_GROUP), name not in exempt)]
        group["params"].append(param)
        group["param_names"].append(name)
    return [g for g in groups.values() if g["params"]]


def format_group_table(groups: Iterable[dict[str, Any]]) -> str:
    """A plain-text table: group, LR, weight decay, tensors, parameters."""
    rows = [("group", "lr", "weight_decay", "tensors", "params")]
    for g in groups:
        numel = sum(p.numel() for p in g["params"])
        rows.append((g["name"], f"{g['lr']:.3g}", f"{g['weight_decay']:.3g}", str(len(g["params"])), f"{numel:,}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)
