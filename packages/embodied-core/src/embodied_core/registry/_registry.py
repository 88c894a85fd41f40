"""Selecting and loading plugins by name."""

from __future__ import annotations

import functools
from typing import Any

from embodied_core.api_version import api_version_string, satisfies_requires_api
from embodied_core.errors import (
    IncompatiblePluginError,
    PluginError,
    PluginLoadError,
    UnknownPluginError,
    did_you_mean,
)
from embodied_core.registry._discovery import PluginEntry, discover
from embodied_core.registry._first_party import install_hint
from embodied_core.registry._paths import ObjectPath
from embodied_core.registry.groups import HOOKS
from embodied_core.registry.specs import PluginSpec


def _describe(entry: PluginEntry) -> str:
    return f"{entry.distribution} {entry.version} ({entry.value})"


def names(group: str) -> list[str]:
    """Sorted names available in ``group`` (conflicting names included: selecting them is an error)."""
    found = discover(group)
    return sorted({*found.entries, *found.conflicts})


def get_entry(group: str, name: str, *, flag: str | None = None) -> PluginEntry:
    """The metadata of plugin ``name`` in ``group``; raises a UsageError for unknown or conflicting names.

    Args:
        flag: the CLI flag that selected the plugin, named in the error message.
    """
    found = discover(group)
    if name in found.conflicts:
        claims = "; ".join(_describe(e) for e in found.conflicts[name])
        raise PluginError(f"{group}: the name {name!r} is provided by more than one distribution: {claims}. "
                          "Uninstall one of them.")
    if name not in found.entries:
        where = f"{flag} " if flag else ""
        available = sorted(found.entries)
        listing = f"installed: {', '.join(available)}" if available else "none is installed"
        hint = install_hint(group, name)
        raise UnknownPluginError(f"unknown {where}{name!r} in plugin group {group}; {listing}"
                                 f"{did_you_mean(name, available)}{'; ' + hint if hint else ''}")
    return found.entries[name]


def load_object(entry: PluginEntry) -> Any:
    """Imports the object an entry names; a failure names the distribution and the import error."""
    if entry.obj is not None:
        return entry.obj
    return _load_value(entry.value, entry.distribution, entry.group, entry.name)


@functools.cache
def _load_value(value: str, distribution: str, group: str, name: str) -> Any:
    try:
        return ObjectPath.parse(value, allow_module=group == HOOKS).load()
    except Exception as exc:  # any import-time failure of third-party code
        raise PluginLoadError(
            f"plugin {name!r} ({group}) from distribution {distribution!r} failed to load {value!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def get_spec(group: str, name: str, *, flag: str | None = None) -> PluginSpec:
    """Loads the spec of plugin ``name`` (importing only its light spec module)."""
    entry = get_entry(group, name, flag=flag)
    spec = load_object(entry)
    if not isinstance(spec, PluginSpec):
        raise PluginLoadError(
            f"plugin {name!r} ({group}) from distribution {entry.distribution!r}: {entry.value!r} is a "
            f"{type(spec).__name__}, expected a PluginSpec"
        )
    if spec.name != name:
        raise PluginLoadError(f"plugin {name!r} ({group}) from {entry.distribution!r}: its spec is named "
                              f"{spec.name!r}; the entry-point name and spec name must agree")
    check_requires_api(entry, spec)
    return spec


def check_requires_api(entry: PluginEntry, spec: PluginSpec) -> None:
    """Raises an IncompatiblePluginError when this core's plugin API does not satisfy ``spec.requires_api``."""
    if spec.requires_api is None or satisfies_requires_api(spec.requires_api):
        return
    from embodied_core import __version__

    api = api_version_string()
    raise IncompatiblePluginError(
        f"plugin {entry.name!r} ({entry.group}) from distribution {entry.distribution!r} {entry.version} requires "
        f"plugin API {spec.requires_api!r} (its spec's requires_api), but embodied-core {__version__} provides "
        f"plugin API {api}; install a version of {entry.distribution} that supports API {api}, or an embodied-core "
        f"whose plugin API satisfies {spec.requires_api!r}")


def load_factory(group: str, name: str, *, flag: str | None = None, options: Any = None) -> Any:
    """Loads the spec, then imports its heavy factory; failures name the distribution.

    Args:
        options: the plugin's structured options (``RunConfig.plugins[name]``) for a spec that declares an
            ``options`` class; the returned factory then passes them as the keyword argument ``options``
            (the class's defaults when None).
    """
    spec = get_spec(group, name, flag=flag)
    entry = get_entry(group, name)
    try:
        factory = spec.load_factory()
    except Exception as exc:
        raise PluginLoadError(
            f"plugin {name!r} ({group}) from distribution {entry.distribution!r} failed to import its "
            f"factory {spec.factory!r}: {type(exc).__name__}: {exc}"
        ) from exc
    if spec.options is None:
        return factory
    return functools.partial(factory, options=spec.options() if options is None else options)
