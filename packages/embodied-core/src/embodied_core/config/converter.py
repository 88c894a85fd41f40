"""One strict cattrs converter for every config object.

Strict means: unknown keys are errors; an ``int`` field accepts only integers (no float truncation, no
bools); a ``bool`` field accepts only booleans (``"false"`` never becomes True); every problem of a
document is reported at once, each with its path and, for unknown keys, the closest valid key.

Values typed on the command line or in the environment arrive as :class:`RawStr` and are parsed by the
field's type (``"20"`` -> 20 for an int field, ``"true"`` -> True for a bool field); strings from YAML are
taken literally.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from embodied_core.errors import ConfigError, did_you_mean

__all__ = ["RawStr", "converter", "structure", "unstructure"]

T = TypeVar("T")

_INT_RE = re.compile(r"[+-]?\d+")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
_NONE = {"none", "null", "~", ""}


class RawStr(str):
    """A string typed by a user on the command line or in the environment, parsed by the target type."""


def _describe(value: Any) -> str:
    # A value typed by the user is text: show it as typed, never the internal RawStr type.
    if isinstance(value, RawStr):
        return repr(str(value))
    return f"{value!r} ({type(value).__name__})"


def _structure_int(value: Any, _: type) -> int:
    if isinstance(value, RawStr) and _INT_RE.fullmatch(value.strip()):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"expected an integer, got {_describe(value)}")


def _structure_float(value: Any, _: type) -> float:
    if isinstance(value, RawStr):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"expected a number, got {_describe(value)}") from None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"expected a number, got {_describe(value)}")


def _structure_bool(value: Any, _: type) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, RawStr) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"expected true or false, got {_describe(value)}")


def _structure_str(value: Any, _: type) -> str:
    if isinstance(value, str):
        return str(value)
    raise ValueError(f"expected a string, got {_describe(value)}")


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _literal_values(tp: Any) -> list[Any]:
    values: list[Any] = []
    for arg in get_args(tp):
        values.extend(_literal_values(arg) if _is_literal(arg) else [arg])
    return values


def _structure_literal(value: Any, tp: Any) -> Any:
    allowed = _literal_values(tp)
    for option in allowed:
        if type(value) is type(option) and value == option:
            return option
        if isinstance(value, RawStr) and str(option) == value.strip():
            return option
    choices = ", ".join(repr(a) for a in allowed)
    raise ValueError(f"must be one of {choices} (got {value!r}){did_you_mean(str(value), map(str, allowed))}")


def _structure_list(value: Any, tp: Any) -> list[Any]:
    (item_type,) = get_args(tp) or (Any,)
    if isinstance(value, RawStr):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        items: list[Any] = [RawStr(part.strip()) for part in text.split(",") if part.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ValueError(f"expected a list, got {_describe(value)}")
    return [converter.structure(item, item_type) for item in items]


def _structure_tuple(value: Any, tp: Any) -> tuple[Any, ...]:
    args = get_args(tp)
    items = _structure_list(value, list[Any])
    if args and args[-1] is not Ellipsis:
        if len(items) != len(args):
            raise ValueError(f"expected {len(args)} values, got {len(items)} ({value!r})")
        return tuple(converter.structure(item, arg) for item, arg in zip(items, args, strict=True))
    item_type = args[0] if args else Any
    return tuple(converter.structure(item, item_type) for item in items)


def _structure_union(value: Any, tp: Any) -> Any:
    args = get_args(tp)
    if type(None) in args and (value is None or (isinstance(value, RawStr) and value.strip().lower() in _NONE)):
        return None
    options = [a for a in args if a is not type(None)]
    # Prefer the option that matches the value's own type, so `True` stays a bool in `bool | int`.
    ordered = sorted(options, key=lambda a: 0 if (isinstance(a, type) and type(value) is a) else 1)
    errors = []
    for option in ordered:
        try:
            return converter.structure(value, option)
        except Exception as exc:
            errors.append(str(exc))
    names = " or ".join(_type_name(o) for o in options)
    raise ValueError(f"expected {names}{' or none' if type(None) in args else ''}, got {_describe(value)}")


def _type_name(tp: Any) -> str:
    if _is_literal(tp):
        return "one of " + ", ".join(repr(v) for v in _literal_values(tp))
    return getattr(tp, "__name__", str(tp))


def _structure_any(value: Any, _: Any) -> Any:
    return value


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(bool, _structure_bool)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook_func(_is_literal, _structure_literal)
    conv.register_structure_hook_func(_is_union, _structure_union)
    conv.register_structure_hook_func(lambda t: get_origin(t) is list or t is list, _structure_list)
    conv.register_structure_hook_func(lambda t: get_origin(t) is tuple or t is tuple, _structure_tuple)
    conv.register_structure_hook_func(lambda t: t is typing.Any, _structure_any)
    conv.register_unstructure_hook(tuple, list)
    return conv


converter = _make_converter()


def _field_names(cls: Any) -> list[str]:
    return [f.name for f in attrs.fields(cls)] if attrs.has(cls) else []


def _flatten_errors(exc: BaseException, path: str, cls: Any, out: list[str]) -> None:
    if isinstance(exc, ForbiddenExtraKeysError):
        valid = _field_names(exc.cl)
        for key in sorted(exc.extra_fields):
            hint = did_you_mean(key, valid)
            if not hint:
                hint = f"; valid keys: {', '.join(valid)}" if len(valid) <= 25 else "; see --help for valid keys"
            out.append(f"{path}.{key}: unknown key{hint}")
        return
    if isinstance(exc, ClassValidationError):
        with_notes, without_notes = exc.group_exceptions()
        for sub, note in with_notes:
            _flatten_errors(sub, f"{path}.{note.name}", note.type, out)
        for sub in without_notes:
            _flatten_errors(sub, path, cls, out)
        return
    if isinstance(exc, IterableValidationError):
        with_notes, without_notes = exc.group_exceptions()
        for sub, note in with_notes:
            _flatten_errors(sub, f"{path}[{note.index}]", None, out)
        for sub in without_notes:
            _flatten_errors(sub, path, None, out)
        return
    if isinstance(exc, KeyError) and path:
        out.append(f"{path}: required key is missing")
        return
    out.append(f"{path}: {exc}")


def _run_validators(obj: Any, path: str, out: list[str]) -> None:
    for field in attrs.fields(type(obj)):
        value = getattr(obj, field.name)
        if field.validator is not None:
            try:
                field.validator(obj, field, value)
            except (ValueError, TypeError) as exc:
                out.append(f"{path}.{field.name}: {exc}")
        if attrs.has(type(value)):
            _run_validators(value, f"{path}.{field.name}", out)


def _validate_fields_alone(data: Mapping[str, Any], cls: Any, path: str, out: list[str]) -> None:
    """After a failed structure, still runs the validators of the fields that did structure."""
    failed = {line.split(":", 1)[0] for line in out}
    for field in attrs.fields(attrs.resolve_types(cls)):
        field_path = f"{path}.{field.name}"
        if field.name not in data or field.validator is None or field_path in failed:
            continue
        try:
            value = converter.structure(data[field.name], field.type)
            field.validator(None, field, value)
        except (ValueError, TypeError) as exc:
            out.append(f"{field_path}: {exc}")


def structure(data: Mapping[str, Any] | None, cls: type[T], *, path: str, source: str | None = None) -> T:
    """Builds ``cls`` from ``data``; raises one ConfigError listing every problem with its path.

    Args:
        data: a mapping of raw values (YAML values or :class:`RawStr` from flags and environment).
        cls: an attrs class.
        path: the prefix of problem paths (``"training"``, ``"model"``).
        source: where the values came from, named in the error.
    """
    data = {} if data is None else data
    if not isinstance(data, Mapping):
        raise ConfigError([f"{path}: expected a mapping of keys to values, got {_describe(data)}"], source=source)
    problems: list[str] = []
    # Validators run after structuring, all of them, so that several bad values are reported together.
    with attrs.validators.disabled():
        try:
            obj = converter.structure(dict(data), cls)
        except Exception as exc:
            _flatten_errors(exc, path, cls, problems)
            _validate_fields_alone(data, cls, path, problems)
            raise ConfigError(sorted(problems), source=source) from None
    _run_validators(obj, path, problems)
    if problems:
        raise ConfigError(sorted(problems), source=source)
    return obj


def unstructure(obj: Any) -> Any:
    """The plain-data form of a config object (what config.yaml holds)."""
    return converter.unstructure(obj)
