"""``embodied plugins [--group G] [--check]``: what is installed.

The first line names embodied-core's version and its plugin API version (``embodied_core.PLUGIN_API_VERSION``).
The listing reads entry-point metadata only (no plugin is imported); ``--check`` then loads every entry the
way a run would (the spec, and its factory; a hook's module) and marks the ones that fail, the ones whose
``requires_api`` this core does not satisfy, and the ones that rely on deprecated module paths.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from embodied_core import registry
from embodied_core.api_version import api_version_string
from embodied_core.deprecation import moved_to, recorded_uses
from embodied_core.errors import EmbodiedError, IncompatiblePluginError
from embodied_core.registry import PluginEntry, PluginSpec
from embodied_core.registry._deprecated_uses import format_uses, static_uses
from embodied_core.registry.groups import ALL_GROUPS, HOOKS

__all__ = ["check_entry", "main", "version_line"]


def version_line() -> str:
    """``embodied-core 0.2.0, plugin API 1.1``."""
    from embodied_core import __version__

    return f"embodied-core {__version__}, plugin API {api_version_string()}"


def _load_status(entry: PluginEntry) -> tuple[str, PluginSpec | None]:
    """The load status (see :func:`check_entry`) and the spec, when it loaded."""
    spec = None
    try:
        if entry.group == HOOKS:
            registry.load_object(entry)
            return "ok", None
        spec = registry.get_spec(entry.group, entry.name)
        missing = spec.missing_requirements()
        if missing:
            return f"missing: {', '.join(missing)}" + (f" ({spec.install_hint})" if spec.install_hint else ""), spec
        registry.load_factory(entry.group, entry.name)
    except IncompatiblePluginError as exc:
        return f"INCOMPATIBLE: {exc}", spec
    except EmbodiedError as exc:
        cause = exc.__cause__
        return (f"FAILED: {type(cause).__name__}: {cause}" if cause is not None else f"FAILED: {exc}"), spec
    return "ok", spec


def check_entry(entry: PluginEntry) -> str:
    """``"ok"``, ``"missing: pkg"`` (a package the spec ``requires``), ``"INCOMPATIBLE: <requirement>"`` (its
    ``requires_api``) or ``"FAILED: <error>"``; then ``"; deprecated: old -> new (where)"`` for each deprecated
    module path the plugin declares, imports in the modules it declares, or imported while it was loaded."""
    before = len(recorded_uses())
    status, spec = _load_status(entry)
    uses = static_uses(entry, spec)
    for use in recorded_uses()[before:]:
        move = moved_to(use.old)
        if move is not None:
            uses.append((move, f"imported by {use.importer}"))
    note = format_uses(uses)
    return f"{status}; {note}" if note else status


def _rows(groups_: Sequence[str], *, check: bool) -> list[tuple[str, ...]]:
    header = ("GROUP", "NAME", "DISTRIBUTION", "VERSION", "MODULE:ATTR") + (("STATUS",) if check else ())
    rows = [header]
    for group in groups_:
        found = registry.discover(group)
        for name in sorted(found.entries):
            entry = found.entries[name]
            status = (check_entry(entry),) if check else ()
            rows.append((group, name, entry.distribution, entry.version, entry.value, *status))
        for name, claims in sorted(found.conflicts.items()):
            for entry in claims:
                status = ("FAILED: claimed by more than one distribution",) if check else ()
                rows.append((group, f"{name} (CONFLICT)", entry.distribution, entry.version, entry.value, *status))
    return rows


def main(argv: Sequence[str]) -> int:
    """Prints one row per plugin; with ``--check``, exits 1 when any entry fails to load."""
    from embodied_core.cli._errors import run_guarded

    parser = argparse.ArgumentParser(prog="embodied plugins", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", help="only this group (e.g. models or embodied.models)")
    parser.add_argument("--check", action="store_true",
                        help="import every listed plugin (spec and factory) and mark the ones that fail to load, "
                             "require another plugin API (INCOMPATIBLE) or use deprecated module paths")
    args = parser.parse_args(argv)

    def run() -> int:
        selected = [registry.normalize_group(args.group)] if args.group else list(ALL_GROUPS)
        rows = _rows(selected, check=args.check)
        print(version_line())
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        failed = [row for row in rows[1:] if args.check and row[-1].startswith(("FAILED", "INCOMPATIBLE"))]
        return 1 if failed else 0

    return run_guarded("embodied plugins", run)
