"""Versions of the embodied distributions and plugins of a run, recorded in config.yaml and meta.json."""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from collections.abc import Iterable
from functools import lru_cache
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
    versions.update(_embodied_distributions(_install_state()))
    return dict(sorted(versions.items()))


def _install_state() -> tuple[object, ...]:
    """The import path and the modification times of the install directories (purelib/platlib, the user site):
    pip changes the mtime of the directory a distribution goes into, so this key tells when the cached scan is
    stale. (The other path entries, such as the working directory, change with every file a run writes.)"""
    dirs = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), site.getusersitepackages()}
    mtimes = []
    for directory in sorted(dirs):
        try:
            mtimes.append((directory, os.stat(directory).st_mtime_ns))
        except OSError:
            continue
    return (tuple(sys.path), tuple(mtimes))


@lru_cache(maxsize=4)
def _embodied_distributions(install_state: tuple[object, ...]) -> tuple[tuple[str, str], ...]:
    """``(name, version)`` of the installed distributions named ``embodied*``. Reading every distribution's
    metadata costs ~0.2 s in an environment with torch and transformers, and every checkpoint save records the
    versions, so the scan runs once per install state (``install_state`` is the cache key)."""
    found = []
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith("embodied"):
            found.append((name, dist.version))
    return tuple(found)


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
