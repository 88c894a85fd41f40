"""``embodied``: the top-level command. Sub-commands beyond ``train`` and ``plugins`` come from the
``embodied.commands`` entry-point group (``embodied data ...`` from embodied-data, ...).

Every sub-command runs under :func:`main`, which also handles a reader that goes away (``embodied train --help |
head``): the command stops quietly with exit code 141 (128 + SIGPIPE, what a Unix tool killed by the closed
pipe reports), not with a ``BrokenPipeError`` traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from embodied_core import registry
from embodied_core.errors import did_you_mean
from embodied_core.registry.groups import COMMANDS

__all__ = ["main"]

_BUILTIN = {"train": "train a model plugin", "plugins": "list installed plugins"}


def _describe_command(name: str) -> str:
    entry = registry.get_entry(COMMANDS, name)
    try:
        description = registry.get_spec(COMMANDS, name).description  # a light spec module, no torch
    except Exception as exc:  # a broken plugin must not break the listing
        description = f"(failed to load: {type(exc).__name__})"
    return f"{description} [{entry.distribution}]" if description else f"[{entry.distribution}]"


def _usage() -> str:
    commands = dict(_BUILTIN)
    installed = registry.names(COMMANDS)
    for name in installed:
        parent = name.split("-", 1)[0]
        if "-" in name and parent in installed:
            continue  # 'data-precompute-latents' is reached as 'embodied data precompute-latents'
        commands[name] = _describe_command(name)
    width = max(len(name) for name in commands) + 2
    lines = ["usage: embodied COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}{help_}" for name, help_ in commands.items()]
    lines += ["", "Run 'embodied COMMAND --help' for a command's options."]
    return "\n".join(lines)


EXIT_CLOSED_PIPE = 141
"""Exit code when the reader of our output closed the pipe (128 + SIGPIPE)."""


def _silence_closed_pipe() -> None:
    """Points stdout and stderr at /dev/null, so the interpreter's final flush of what is still buffered for the
    closed pipe cannot fail again ("Exception ignored ... BrokenPipeError")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # a stream without a file descriptor (replaced by a test harness)
            continue
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``embodied`` console script."""
    try:
        try:
            return _dispatch(argv)
        finally:
            sys.stdout.flush()  # a closed pipe surfaces here (also after --help's SystemExit), not at exit
    except BrokenPipeError:
        _silence_closed_pipe()
        return EXIT_CLOSED_PIPE


def _dispatch(argv: Sequence[str] | None) -> int:
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
    hint = registry.install_hint(COMMANDS, command)
    print(f"embodied: error: unknown command {command!r}{did_you_mean(command, choices)}; "
          f"valid: {', '.join(choices)}{'; ' + hint if hint else ''}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
