"""Choosing FSDP units: which submodules get their own ``fully_shard`` call.

In order of precedence: ``--fsdp-wrap-modules`` (class names), else the model plugin's ``fsdp_units()``
(classes), else automatic: modules of a class that occurs more than once (repeated layers) with at least
``--fsdp-min-num-params`` parameters, then the largest remaining subtrees with at least
``--fsdp-leftover-min-num-params``. ``--fsdp-no-wrap-modules`` classes are never units. The root is
not returned: the strategy shards it last, after every unit.

Per-unit settings: ``--fsdp-reshard-module-overrides`` gives the units of named classes their own reshard
policy (:func:`unit_reshard_policies`), and ``--fsdp-forward-prefetch-distance`` /
``--fsdp-backward-prefetch-distance`` make each unit all-gather the next N units explicitly
(:func:`set_explicit_prefetch`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from torch import nn
from torch.distributed.fsdp import FSDPModule

from embodied_core.errors import ConfigError, did_you_mean

__all__ = ["forward_order", "parse_class_names", "select_units", "set_explicit_prefetch", "unit_reshard_policies"]

ReshardPolicy = bool | int | None


def parse_class_names(text: str | None) -> list[str]:
    """``"Block, Encoder"`` -> ``["Block", "Encoder"]``."""
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def _num_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _check_names(names: list[str], present: set[str], flag: str) -> None:
    unknown = [n for n in names if n not in present]
    if unknown:
        problems = [f"{flag}: no module of class {n!r} in the model{did_you_mean(n, present)}" for n in unknown]
        problems.append(f"{flag}: classes in this model: {', '.join(sorted(present))}")
        raise ConfigError(problems)


def _outermost(modules: list[tuple[str, nn.Module]]) -> list[tuple[str, nn.Module]]:
    """Drops modules nested inside another module of the list."""
    chosen: list[tuple[str, nn.Module]] = []
    for name, module in sorted(modules, key=lambda item: item[0].count(".") if item[0] else -1):
        if not any(name.startswith(prefix + ".") for prefix, _ in chosen):
            chosen.append((name, module))
    return chosen


def _auto_units(model: nn.Module, *, blocked: set[str], min_num_params: int,
                leftover_min_num_params: int) -> list[tuple[str, nn.Module]]:
    named = [(n, m) for n, m in model.named_modules() if n and type(m).__name__ not in blocked]
    counts = Counter(type(m) for _, m in named)
    repeated = [(n, m) for n, m in named
                if counts[type(m)] > 1 and _num_params(m) > 0 and _num_params(m) >= min_num_params]
    units = _outermost(repeated)
    inside = lambda name: any(name == u or name.startswith(u + ".") or u.startswith(name + ".")  # noqa: E731
                              for u, _ in units)
    leftovers = [(n, m) for n, m in named if not inside(n) and _num_params(m) > 0
                 and _num_params(m) >= leftover_min_num_params]
    return units + _outermost(leftovers)


def select_units(model: nn.Module, *, wrap_modules: str | None, no_wrap_modules: str | None,
                 min_num_params: int, leftover_min_num_params: int) -> list[tuple[str, nn.Module]]:
    """FSDP units of ``model`` as ``(name, module)``, innermost first (the order ``fully_shard`` needs).

    Raises:
        ConfigError: a class named in ``--fsdp-wrap-modules`` or ``--fsdp-no-wrap-modules`` does not occur
            in the model.
    """
    present = {type(m).__name__ for _, m in model.named_modules()}
    blocked = set(parse_class_names(no_wrap_modules))
    _check_names(sorted(blocked), present, "--fsdp-no-wrap-modules")
    explicit = parse_class_names(wrap_modules)
    if explicit:
        _check_names(explicit, present, "--fsdp-wrap-modules")
        wanted = set(explicit) - blocked
        units = [(n, m) for n, m in model.named_modules() if n and type(m).__name__ in wanted]
    elif declared := tuple(model.fsdp_units()):  # ModelPlugin.fsdp_units: () when the model declares none
        units = [(n, m) for n, m in model.named_modules()
                 if n and isinstance(m, declared) and type(m).__name__ not in blocked]
    else:
        units = _auto_units(model, blocked=blocked, min_num_params=min_num_params,
                            leftover_min_num_params=leftover_min_num_params)
    return sorted(units, key=lambda item: -item[0].count("."))


def unit_reshard_policies(units: Sequence[tuple[str, nn.Module]], *, default: ReshardPolicy,
                          overrides: Mapping[str, ReshardPolicy]) -> dict[str, ReshardPolicy]:
    """Unit name -> reshard-after-forward: its class's ``--fsdp-reshard-module-overrides`` value, else ``default``.

    Raises:
        ConfigError: an override names a class no unit has (naming the unit classes there are).
    """
    classes = {type(m).__name__ for _, m in units}
    unknown = [name for name in overrides if name not in classes]
    if unknown:
        raise ConfigError([f"--fsdp-reshard-module-overrides: {name!r} is the class of no FSDP unit"
                           f"{did_you_mean(name, classes)}; unit classes: {', '.join(sorted(classes)) or 'none'} "
                           "(choose units with --fsdp-wrap-modules)" for name in unknown])
    return {name: overrides.get(type(module).__name__, default) for name, module in units}


def forward_order(model: nn.Module, units: Sequence[tuple[str, nn.Module]]) -> list[nn.Module]:
    """The units in the order forward reaches them (module definition order, outer before inner)."""
    ids = {id(m) for _, m in units}
    return [m for _, m in model.named_modules() if id(m) in ids]


def set_explicit_prefetch(model: nn.Module, units: Sequence[tuple[str, nn.Module]], *, forward: int,
                          backward: int) -> None:
    """Each sharded unit all-gathers the next ``forward`` units of forward order during its forward and the next
    ``backward`` units of backward (reverse) order during its backward; 0 keeps FSDP's implicit prefetching."""
    order = [m for m in forward_order(model, units) if isinstance(m, FSDPModule)]
    for i, unit in enumerate(order):
        if forward:
            unit.set_modules_to_forward_prefetch(order[i + 1 : i + 1 + forward])
        if backward:
            unit.set_modules_to_backward_prefetch(order[max(i - backward, 0) : i][::-1])
