"""Plugins' own config fields (``PluginSpec.options``): the ``plugins:`` section of a run.

A spec may declare an attrs ``options`` class. When the plugin is selected, the run's ``plugins.<name>``
mapping (YAML ``plugins: {<name>: {...}}``, dotlist ``plugins.<name>.x=1``, flags ``--plugins.<name>.x 1``)
is structured into it by the same strict converter as the model's fields, its fields are listed by
``embodied train --help``, and the factory receives the instance as ``options=``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from embodied_core import registry
from embodied_core.config.converter import structure
from embodied_core.config.selection import selected_plugins
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError, EmbodiedError, did_you_mean
from embodied_core.registry import groups

__all__ = ["OPTIONS_GROUPS", "SECTION", "option_classes", "structure_options"]

SECTION = "plugins"

OPTIONS_GROUPS = (groups.OPTIMIZERS, groups.LR_SCHEDULERS, groups.SAMPLERS, groups.LOGGERS,
                  groups.DISTRIBUTED_STRATEGIES, groups.TRAINERS)
"""Groups whose factories core calls with ``options=``; a spec of another group that declares options is an
error at validation (its options would never reach it)."""


def option_classes(args: TrainingArgs, *, model_name: str | None, world_size: int,
                   only: Collection[str] | None = None) -> tuple[dict[str, type], list[str]]:
    """``({plugin name: options class}, problems)`` for the selected plugins that declare options.

    Plugins that fail to load are left out (validation reports them); two selected plugins of one name that
    both declare options, or options on a group that never receives them, are problems.

    Args:
        only: consider only these plugin names (None: every selected plugin); other specs are not loaded.
    """
    classes: dict[str, type] = {}
    owners: dict[str, str] = {}
    problems: list[str] = []
    for selection in selected_plugins(args, model_name=model_name, world_size=world_size, hooks=()):
        if only is not None and selection.name not in only:
            continue
        try:
            spec = registry.get_spec(selection.group, selection.name)
        except EmbodiedError:
            continue
        if spec.options is None:
            continue
        where = f"{selection.flag} {selection.name}"
        if selection.group not in OPTIONS_GROUPS:
            receivers = ", ".join(g.removeprefix("embodied.") for g in OPTIONS_GROUPS)
            problems.append(f"{where}: declares options, but {selection.group} plugins are built without them; "
                            f"options reach plugins of {receivers}")
        elif not selection.name.isidentifier():
            problems.append(f"{where}: a plugin with options needs a name that is a Python identifier")
        elif selection.name in classes:
            problems.append(f"{SECTION}.{selection.name}: both {owners[selection.name]} and {where} declare options "
                            "under this name; rename one of the plugins")
        else:
            classes[selection.name] = spec.options
            owners[selection.name] = where
    return classes, problems


def structure_options(raw: Any, classes: Mapping[str, type]) -> tuple[dict[str, Any], list[str]]:
    """Structures the ``plugins:`` section; ``(options by plugin name, problems)``.

    Every selected plugin with options gets an instance (its defaults when the section omits it); a key that
    names no selected plugin with options is a problem.
    """
    raw = {} if raw is None else raw
    if not isinstance(raw, Mapping):
        return {}, [f"{SECTION}: expected a mapping of plugin names to their options, got {type(raw).__name__}"]
    problems: list[str] = []
    for key in raw:
        if key not in classes:
            valid = ", ".join(sorted(classes)) or "none (no selected plugin declares options)"
            hint = did_you_mean(str(key), classes)
            problems.append(f"{SECTION}.{key}: no selected plugin with options has this name{hint}; valid: {valid}")
    out: dict[str, Any] = {}
    for name, cls in classes.items():
        try:
            out[name] = structure(raw.get(name), cls, path=f"{SECTION}.{name}")
        except ConfigError as exc:
            problems.extend(exc.problems)
    return out, problems
