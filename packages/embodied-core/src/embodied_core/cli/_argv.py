"""Splitting ``embodied train`` argv into tyro flags and dotlist overrides, and the phase-1 scan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

import attrs

from embodied_core.config.layers import is_dotlist_item

__all__ = ["boolean_flags", "scan_value", "split_argv", "wants_help"]


def _is_bool_type(tp: Any) -> bool:
    return tp is bool or (bool in get_args(tp) and all(a in (bool, type(None)) for a in get_args(tp)))


def boolean_flags(cls: type, prefix: str = "") -> set[str]:
    """``--x`` and ``--no-x`` for every bool field of an attrs class (nested classes get ``--a.x``)."""
    flags: set[str] = set()
    for field in attrs.fields(attrs.resolve_types(cls)):
        name = prefix + field.name.replace("_", "-")
        if _is_bool_type(field.type):
            head, _, leaf = name.rpartition(".")
            flags |= {f"--{name}", f"--{head + '.' if head else ''}no-{leaf}"}
        elif attrs.has(field.type):
            flags |= boolean_flags(field.type, prefix=f"{name}.")
    return flags


def split_argv(argv: Sequence[str], bool_flags: set[str]) -> tuple[list[str], list[str]]:
    """Returns ``(flags, dotlist)``; a ``model.x=1`` token that is the value of a flag stays a flag value."""
    flags: list[str] = []
    dotlist: list[str] = []
    expects_value = False
    for token in argv:
        if expects_value:
            flags.append(token)
            expects_value = False
        elif token.startswith("--"):
            flags.append(token)
            expects_value = "=" not in token and token not in bool_flags
        elif is_dotlist_item(token):
            dotlist.append(token)
        else:
            flags.append(token)
    return flags, dotlist


def scan_value(flags: Sequence[str], name: str) -> str | None:
    """The value of ``--name VALUE`` / ``--name=VALUE`` in ``flags`` (the last one wins), or None."""
    value = None
    for i, token in enumerate(flags):
        if token == name and i + 1 < len(flags):
            value = flags[i + 1]
        elif token.startswith(name + "="):
            value = token.split("=", 1)[1]
    return value


def wants_help(flags: Sequence[str]) -> bool:
    """True when ``-h`` or ``--help`` is present."""
    return any(token in ("-h", "--help") for token in flags)
