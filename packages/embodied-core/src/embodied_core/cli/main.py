"""``embodied``: the top-level command. Sub-commands beyond ``train`` and ``plugins`` come from the
``embodied.commands`` entry-point group (``embodied data ...`` from embodied-data, ...)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from embodied_core import registry
from embodied_core.errors import did_you_mean
from embodied_core.registry.groups import COMMANDS

__all__ = ["main"]

_BUILTIN = {"train": "train a model plugin", "plugins": "list installed plugins"}


def _usage() -> str:
    lines = ["usage: embodied COMMAND [ARGS...]", "", "commands:"]
    commands = dict(_BUILTIN)
    for name in registry.names(COMMANDS):
        entry = registry.get_entry(COMMANDS, name)
        commands[name] = f"(from {entry.distribution})"
    lines += [f"  {name:<12}{help_}" for name, help_ in commands.items()]
    lines += ["", "Run 'embodied COMMAND --help' for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``embodied`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "train":
        from embodied_core.cli.train import main as train_main

        return train_main(rest)
    if command == "plugins":
        from embodied_core.cli.plugins_cmd import main as plugins_main

        return plugins_main(rest)
    if command in registry.names(COMMANDS):
        from embodied_core.cli._errors import run_guarded

        return run_guarded(f"embodied {command}", lambda: registry.load_factory(COMMANDS, command)(rest))
    choices = [*_BUILTIN, *registry.names(COMMANDS)]
    print(f"embodied: error: unknown command {command!r}{did_you_mean(command, choices)}; "
          f"valid: {', '.join(choices)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
