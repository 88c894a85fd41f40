"""``embodied plugins [--group G]``: what is installed, read from metadata only (no plugin imported)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from embodied_core import registry
from embodied_core.registry.groups import ALL_GROUPS

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    """Prints one row per plugin: group, name, distribution, version (conflicts are marked)."""
    from embodied_core.cli._errors import run_guarded

    parser = argparse.ArgumentParser(prog="embodied plugins", description=__doc__)
    parser.add_argument("--group", help="only this group (e.g. models or embodied.models)")
    args = parser.parse_args(argv)

    def run() -> int:
        selected = [registry.normalize_group(args.group)] if args.group else list(ALL_GROUPS)
        rows = [("GROUP", "NAME", "DISTRIBUTION", "VERSION")]
        for group in selected:
            found = registry.discover(group)
            for name in sorted(found.entries):
                entry = found.entries[name]
                rows.append((group, name, entry.distribution, entry.version))
            for name, claims in sorted(found.conflicts.items()):
                for entry in claims:
                    rows.append((group, f"{name} (CONFLICT)", entry.distribution, entry.version))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        return 0

    return run_guarded("embodied plugins", run)
