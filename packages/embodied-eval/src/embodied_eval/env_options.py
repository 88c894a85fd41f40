"""Env plugins' options, the same way for ``embodied eval`` and ``embodied data collect``.

An env plugin takes options in one of two ways:

- its ``PluginSpec`` declares an ``options`` attrs class: every field becomes a flag of the command
  (``task`` -> ``--task``, help text from the docstring under the field), values typed on the command line are
  parsed by the field's type with core's strict converter, and the factory receives the instance as
  ``options=``; ``--env-option KEY=VALUE`` sets the same fields;
- otherwise its factory's keyword-only parameters are its options, set with ``--env-option KEY=VALUE``.
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import itertools
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from embodied_core import registry
from embodied_core.errors import PluginError, UsageError
from embodied_core.registry.groups import ENVS

__all__ = ["EnvFactory", "add_option_flags", "field_docs", "flag_values", "options_class", "resolve_env", "scan_env"]

EnvFactory = Callable[..., Any]
"""``factory(metadata, *, max_steps=None) -> EvalEnv`` with the env's options bound."""

_DEST = "env_option__"


def scan_env(argv: Sequence[str]) -> str | None:
    """The value of ``--env`` in ``argv`` (``--env NAME`` or ``--env=NAME``), before parsing; None if absent."""
    for i, arg in enumerate(argv):
        if arg == "--env" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--env="):
            return arg.split("=", 1)[1]
    return None


def options_class(env: str | None) -> type | None:
    """The options class env plugin ``env`` declares (loads only its spec), or None."""
    if env is None:
        return None
    return registry.get_spec(ENVS, env, flag="--env").options


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: the docstring written under it}`` of an attrs class (what tyro shows, read the same way)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, following in itertools.pairwise(body):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def add_option_flags(parser: argparse.ArgumentParser, cls: type, *, env: str) -> None:
    """Adds one ``--field-name`` flag per field of ``cls`` (values kept as typed; see :func:`flag_values`)."""
    group = parser.add_argument_group(f"options of --env {env}")
    docs = field_docs(cls)
    for field in attrs.fields(cls):
        flag = "--" + field.name.replace("_", "-")
        default = field.default if field.default is not attrs.NOTHING else None
        shown = "" if default is None else f" (default {default})"
        try:
            group.add_argument(flag, dest=_DEST + field.name, default=None, metavar=field.name.upper(),
                               help=docs.get(field.name, "") + shown)
        except argparse.ArgumentError as exc:
            raise PluginError(f"--env {env}: its option {field.name!r} clashes with a flag of this command "
                              f"({exc}); the plugin must rename it") from None


def flag_values(args: argparse.Namespace) -> dict[str, str]:
    """The env-option flags the user set, ``{field: text}``."""
    return {key[len(_DEST):]: value for key, value in vars(args).items()
            if key.startswith(_DEST) and value is not None}


def resolve_env(env: str, *, flags: Mapping[str, Any] | None = None,
                env_options: Mapping[str, Any] | None = None) -> tuple[EnvFactory, dict[str, Any]]:
    """The factory of env plugin ``env`` with its options bound, and the options as recorded in eval.json.

    Args:
        flags: values of the option flags (text typed on the command line, parsed by the field types).
        env_options: ``--env-option`` values (already parsed) or options given from Python.

    Raises:
        UsageError: the simulator is not installed, an option is unknown, set twice or has a bad value.
    """
    spec = registry.get_spec(ENVS, env, flag="--env")
    missing = spec.missing_requirements()
    if missing:
        raise UsageError(f"--env {env} needs {', '.join(missing)}, which is not installed: {spec.install_hint}")
    flags, env_options = dict(flags or {}), dict(env_options or {})
    twice = sorted(set(flags) & set(env_options))
    if twice:
        raise UsageError(f"--env {env}: {', '.join(twice)} set both as a flag and with --env-option; keep one")
    if spec.options is None:
        if flags:
            raise UsageError(f"--env {env} declares no option flags ({', '.join(flags)} given)")
        factory = registry.load_factory(ENVS, env, flag="--env")
        _check_keywords(env, factory, env_options)
        return functools.partial(factory, **env_options), env_options
    from embodied_core.config.converter import RawStr, structure, unstructure

    raw = {**{k: RawStr(v) for k, v in flags.items()}, **env_options}
    options = structure(raw, spec.options, path=f"--env {env} options")
    factory = registry.load_factory(ENVS, env, flag="--env", options=options)
    return factory, unstructure(options)


def _check_keywords(env: str, factory: Callable[..., Any], options: Mapping[str, Any]) -> None:
    accepted = [name for name, p in inspect.signature(factory).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "max_steps"]
    unknown = [name for name in options if name not in accepted]
    if unknown:
        raise UsageError(f"--env-option {', '.join(unknown)}: {env} accepts {', '.join(accepted) or 'no options'}")
