"""Versions of the embodied distributions and plugins of a run, recorded in config.yaml and meta.json."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata

from embodied_core import registry
from embodied_core.config.run_config import RunConfig
from embodied_core.config.selection import Selection, selected_plugins
from embodied_core.errors import UsageError
from embodied_core.registry.groups import ALL_GROUPS

__all__ = ["embodied_versions", "plugin_versions", "run_plugin_versions"]


def embodied_versions() -> dict[str, str]:
    """``{distribution: version}`` for every installed distribution that provides embodied plugins or
    whose name starts with ``embodied``."""
    versions: dict[str, str] = {}
    for group in ALL_GROUPS:
        for entry in registry.discover(group).entries.values():
            versions[entry.distribution] = entry.version
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith("embodied"):
            versions[name] = dist.version
    return dict(sorted(versions.items()))


def plugin_versions(selections: Iterable[Selection]) -> dict[str, str]:
    """``{"group/name": "distribution version"}`` for the plugins a run selected (``"in-process"`` for hook
    objects passed to ``Trainer(plugins=...)``, which no distribution provides)."""
    out = {}
    for selection in selections:
        try:
            entry = registry.get_entry(selection.group, selection.name)
        except UsageError:
            out[f"{selection.group}/{selection.name}"] = "in-process"
            continue
        out[f"{selection.group}/{selection.name}"] = f"{entry.distribution} {entry.version}"
    return out


def run_plugin_versions(config: RunConfig, *, world_size: int, hooks: Iterable[str]) -> dict[str, str]:
    """:func:`plugin_versions` of every plugin ``config`` selects: model, trainer, data (format, and the dataset
    strategy and video backend when the format reads them), optimizer, schedule, sampler, the distributed
    strategy the launch runs, the loggers, and ``hooks`` (the names registered with the hook manager)."""
    return plugin_versions(selected_plugins(config.training, model_name=config.model_name, world_size=world_size,
                                            hooks=hooks))
