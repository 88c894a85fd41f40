"""Splitting ``embodied train`` argv into tyro flags and dotlist overrides, and the phase-1 scan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

import attrs

from embodied_core.config.layers import is_dotlist_item
from embodied_core.errors import ConfigError

__all__ = ["boolean_flags", "normalize_values", "scan_value", "split_argv", "value_kinds", "wants_help"]

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
_BOOL_SPELLINGS = "true, false, yes, no, on, off, 1, 0"


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


def value_kinds(cls: type, prefix: str = "") -> dict[str, str]:
    """Flags whose textual values get normalized: ``"bool"`` (pure bool), ``"tristate"`` (bool/int/None
    unions such as ``--fsdp-reshard-default``) and ``"optional"`` (``X | None`` with X not str)."""
    kinds: dict[str, str] = {}
    for field in attrs.fields(attrs.resolve_types(cls)):
        name = f"--{prefix}{field.name.replace('_', '-')}"
        args = get_args(field.type)
        if _is_bool_type(field.type):
            kinds[name] = "bool"
        elif bool in args:
            kinds[name] = "tristate"
        elif type(None) in args and str not in args:
            kinds[name] = "optional"
        elif attrs.has(field.type):
            kinds.update(value_kinds(field.type, prefix=f"{prefix}{field.name.replace('_', '-')}."))
    return kinds


def _negative(flag: str) -> str:
    """``--resume`` -> ``--no-resume``; ``--model.use-x`` -> ``--model.no-use-x``."""
    head, _, leaf = flag[2:].rpartition(".")
    return f"--{head + '.' if head else ''}no-{leaf}"


def _not_a_boolean(flag: str, value: str) -> str:
    return (f"{flag} {value!r}: not a boolean; write {flag} or {_negative(flag)}, or {flag}=VALUE with VALUE one of "
            f"{_BOOL_SPELLINGS}")


def _normalize_one(flag: str, value: str, kind: str) -> list[str]:
    low = value.strip().lower()
    if kind == "bool" and low in _TRUE | _FALSE:
        return [flag if low in _TRUE else _negative(flag)]
    if kind == "tristate" and low in ("true", "false", "none"):
        return [flag, low.capitalize()]
    if kind == "optional" and low in ("none", "null"):
        return [flag, "None"]
    return [flag, value]


def _takes_next(kind: str, token: str) -> bool:
    # A pure bool flag takes the next token only when it spells a boolean (`--resume true`), so
    # `--resume model.x=1` still means "resume" followed by a dotlist item.
    return kind != "bool" or token.strip().lower() in _TRUE | _FALSE


def _is_bare_value(token: str) -> bool:
    """A token that is neither a flag nor a dotlist item (``embodied train`` takes no positional arguments)."""
    return not token.startswith("-") and not is_dotlist_item(token)


def normalize_values(flags: Sequence[str], kinds: dict[str, str]) -> list[str]:
    """Accepts the spellings of FLAGS.md: ``--resume true`` / ``--resume=false`` become ``--resume`` /
    ``--no-resume``; ``--fsdp-reshard-default none`` becomes ``None``; ``--lr-decay-iters none`` -> ``None``.

    Raises:
        ConfigError: a boolean flag given a value that is not a boolean (``--resume=maybe``, ``--resume maybe``)
            or a negative flag given a value (``--no-resume=true``), each naming the flag and the valid spellings.
    """
    negatives = {_negative(flag): flag for flag, kind in kinds.items() if kind == "bool"}
    out: list[str] = []
    problems: list[str] = []
    i = 0
    while i < len(flags):
        token = flags[i]
        name, eq, inline = token.partition("=")
        kind = kinds.get(name)
        if kind == "bool" and eq and inline.strip().lower() not in _TRUE | _FALSE:
            problems.append(_not_a_boolean(name, inline))
        elif name in negatives and eq:
            problems.append(f"{name} takes no value (got {inline!r}); write {name}, or {negatives[name]}=false")
        elif kind and eq:
            out += _normalize_one(name, inline, kind)
        elif kind and i + 1 < len(flags) and _takes_next(kind, flags[i + 1]):
            out += _normalize_one(name, flags[i + 1], kind)
            i += 1
        elif kind == "bool" and i + 1 < len(flags) and _is_bare_value(flags[i + 1]):
            problems.append(_not_a_boolean(name, flags[i + 1]))
            i += 1
        else:
            out.append(token)
        i += 1
    if problems:
        raise ConfigError(problems, source="flags")
    return out


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
