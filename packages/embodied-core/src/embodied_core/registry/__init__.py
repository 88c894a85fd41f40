"""Plugin registry: discovery from entry points, selection by name, lazy loading.

Public API:
    names(group), get_entry(group, name), get_spec(group, name), load_factory(group, name),
    register(group, name, spec), unregister(group, name), clear_cache(), discover(group),
    import_object("module:attr"), install_hint(group, name).
"""

from embodied_core.registry import groups
from embodied_core.registry._discovery import (
    PLUGINS_ENV_VAR,
    GroupEntries,
    PluginEntry,
    clear_cache,
    discover,
    normalize_group,
    register,
    unregister,
)
from embodied_core.registry._first_party import install_hint
from embodied_core.registry._paths import ObjectPath, import_object
from embodied_core.registry._registry import get_entry, get_spec, load_factory, load_object, names
from embodied_core.registry.specs import DatasetDefaults, DatasetFormatSpec, ModelSpec, PluginSpec

__all__ = [
    "PLUGINS_ENV_VAR",
    "DatasetDefaults",
    "DatasetFormatSpec",
    "GroupEntries",
    "ModelSpec",
    "ObjectPath",
    "PluginEntry",
    "PluginSpec",
    "clear_cache",
    "discover",
    "get_entry",
    "get_spec",
    "groups",
    "import_object",
    "install_hint",
    "load_factory",
    "load_object",
    "names",
    "normalize_group",
    "register",
    "unregister",
]
