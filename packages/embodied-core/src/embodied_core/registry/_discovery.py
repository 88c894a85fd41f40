"""Discovery of plugins from entry-point metadata, ``EMBODIED_PLUGINS`` and in-process registration.

Nothing here imports plugin code: an entry is the metadata of one plugin (group, name, ``module:attr``,
distribution, version). Specs are loaded by :mod:`embodied_core.registry._registry` only when selected.
"""

from __future__ import annotations

import functools
import os
from importlib import metadata
from typing import Any

import attrs

from embodied_core.errors import UsageError
from embodied_core.registry._paths import ObjectPath
from embodied_core.registry.groups import ALL_GROUPS, HOOKS

PLUGINS_ENV_VAR = "EMBODIED_PLUGINS"


@attrs.frozen
class PluginEntry:
    """Metadata of one plugin; ``obj`` is set for in-process registrations only."""

    group: str
    name: str
    value: str
    distribution: str
    version: str
    source: str = "entry-point"
    obj: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.define
class GroupEntries:
    """The plugins of one group: resolved entries plus names claimed by more than one distribution."""

    entries: dict[str, PluginEntry] = attrs.Factory(dict)
    conflicts: dict[str, list[PluginEntry]] = attrs.Factory(dict)

    def add(self, entry: PluginEntry) -> None:
        if entry.name in self.conflicts:
            self.conflicts[entry.name].append(entry)
            return
        existing = self.entries.get(entry.name)
        if existing is None:
            self.entries[entry.name] = entry
        elif (existing.distribution, existing.value) != (entry.distribution, entry.value):
            # The same distribution seen twice on sys.path (e.g. an editable and a regular install of one
            # version) is one plugin; two distributions claiming one name is a conflict.
            del self.entries[entry.name]
            self.conflicts[entry.name] = [existing, entry]


_registered: dict[str, dict[str, PluginEntry]] = {}


def normalize_group(group: str) -> str:
    """Accepts ``"models"`` or ``"embodied.models"``; returns the full group name or raises UsageError."""
    full = group if group.startswith("embodied.") else f"embodied.{group}"
    if full not in ALL_GROUPS:
        short = ", ".join(g.removeprefix("embodied.") for g in ALL_GROUPS)
        raise UsageError(f"unknown plugin group {group!r}; valid groups: {short}")
    return full


@functools.cache
def _entry_point_entries() -> dict[str, tuple[PluginEntry, ...]]:
    found: dict[str, list[PluginEntry]] = {g: [] for g in ALL_GROUPS}
    for dist in metadata.distributions():
        # Reading entry_points.txt is cheap; parsing METADATA of every installed distribution is not, so
        # only distributions that declare an embodied group get their name and version read.
        text = dist.read_text("entry_points.txt")
        if not text or "[embodied." not in text:
            continue
        meta = dist.metadata  # parsed on every access (and dist.version parses it again): read it once
        dist_name, version = meta["Name"] or "<unknown>", meta["Version"] or "<unknown>"
        for ep in dist.entry_points:
            if ep.group in found:
                found[ep.group].append(PluginEntry(ep.group, ep.name, ep.value, dist_name, version))
    return {g: tuple(v) for g, v in found.items()}


def _env_entries(raw: str) -> list[PluginEntry]:
    entries = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        group, sep1, rest = item.partition(":")
        name, sep2, value = rest.partition("=")
        full = normalize_group(group.strip()) if sep1 else ""
        try:
            if not (sep1 and sep2 and name.strip()):
                raise ValueError("missing group, name or value")
            ObjectPath.parse(value, allow_module=full == HOOKS)
        except ValueError:
            raise UsageError(
                f"{PLUGINS_ENV_VAR}: cannot parse {item!r}; expected 'group:name=package.module:attr' entries "
                "separated by commas, e.g. 'models:my_policy=my_pkg.spec:SPEC' (a module-valued hook plugin: "
                "'hooks:my_hooks=my_pkg.hooks')"
            ) from None
        entries.append(PluginEntry(full, name.strip(), value.strip(), f"{PLUGINS_ENV_VAR}", "-", source="env"))
    return entries


def discover(group: str) -> GroupEntries:
    """All plugins of ``group`` from entry points, the environment and :func:`register`."""
    result = GroupEntries()
    for entry in _entry_point_entries()[group]:
        result.add(entry)
    for entry in _env_entries(os.environ.get(PLUGINS_ENV_VAR, "")):
        if entry.group == group:
            result.add(entry)
    for entry in _registered.get(group, {}).values():
        result.add(entry)
    return result


def register(group: str, name: str, spec: Any, *, replace: bool = False) -> None:
    """Registers a plugin in this process (for unpackaged development and tests).

    Args:
        group: ``"embodied.models"`` or its short form ``"models"``.
        name: the name users select.
        spec: a spec object (or, for ``embodied.hooks``, a pluggy plugin object), or a ``"module:attr"``
            string naming one.
        replace: replace an earlier in-process registration of the same name.
    """
    full = normalize_group(group)
    slot = _registered.setdefault(full, {})
    if name in slot and not replace:
        raise UsageError(f"plugin {name!r} is already registered in {full}; pass replace=True to replace it")
    if isinstance(spec, str):
        try:
            ObjectPath.parse(spec, allow_module=full == HOOKS)
        except ValueError as exc:
            raise UsageError(f"register({group!r}, {name!r}, ...): {exc}") from None
    value = spec if isinstance(spec, str) else f"<in-process {type(spec).__name__}>"
    obj = None if isinstance(spec, str) else spec
    slot[name] = PluginEntry(full, name, value, "<in-process>", "-", source="register", obj=obj)


def unregister(group: str, name: str) -> None:
    """Removes an in-process registration (no error when absent)."""
    _registered.get(normalize_group(group), {}).pop(name, None)


def clear_cache() -> None:
    """Forgets cached entry-point metadata (after installing or removing a distribution in-process)."""
    _entry_point_entries.cache_clear()
