"""Versions of the embodied distributions and plugins of a run, recorded in config.yaml and meta.json."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from embodied_core import registry
from embodied_core.registry.groups import ALL_GROUPS

__all__ = ["embodied_versions", "plugin_versions"]


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


def plugin_versions(selected: dict[str, str]) -> dict[str, Any]:
    """``{"group/name": "distribution version"}`` for the plugins a run selected."""
    out = {}
    for group, name in selected.items():
        entry = registry.get_entry(group, name)
        out[f"{group}/{name}"] = f"{entry.distribution} {entry.version}"
    return out
