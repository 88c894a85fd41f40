"""Choosing FSDP units: which submodules get their own ``fully_shard`` call.

In order of precedence: ``--fsdp-wrap-modules`` (class names), else the model plugin's ``fsdp_units()``
(classes), else automatic: modules of a class that occurs more than once (repeated layers) with at least
``--fsdp-min-num-params`` parameters, then the largest remaining subtrees with at least
``--fsdp-leftover-min-num-params``. ``--fsdp-no-wrap-modules`` classes are never units. The root is
not returned: the strategy shards it last, after every unit.
"""

from __future__ import annotations

from collections import Counter

from torch import nn

from embodied_core.errors import ConfigError, did_you_mean

__all__ = ["parse_class_names", "select_units"]


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
