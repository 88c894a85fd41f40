"""The configuration layers below the CLI flags: YAML files, ``EMBODIED_*`` environment, dotlist.

Each layer produces a nested mapping ``{"training": {...}, "model": {...}, "data": {...}}``; values typed
by a user (environment, dotlist) are :class:`RawStr` and parsed by the target field's type.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from embodied_core.config.converter import RawStr
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError, UsageError, did_you_mean

__all__ = [
    "ENV_PREFIX",
    "RESERVED_ENV_VARS",
    "SECTIONS",
    "deep_merge",
    "dotlist_layer",
    "env_layer",
    "is_dotlist_item",
    "read_package_yaml",
    "read_yaml",
]

ENV_PREFIX = "EMBODIED_"
RESERVED_ENV_VARS = frozenset({"EMBODIED_PLUGINS"})
"""``EMBODIED_*`` variables that are not flags."""
SECTIONS = ("training", "model", "data", "plugins")
"""Sections of a config document; ``plugins`` holds the options of selected plugins, by plugin name."""
_MIXTURE_KEY = "data_mixture"
"""The dataset-mixture section (``embodied_core.config.mixture``): in YAML only, not a dotlist section."""
_YAML_TOP_KEYS = (*SECTIONS, _MIXTURE_KEY, "embodied")
_DOTLIST_RE = re.compile(r"^(training|model|data|plugins)\.([A-Za-z_][\w.-]*)=(.*)$", re.DOTALL)


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively merges ``override`` into a copy of ``base`` (mappings merge, other values replace)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _check_document(doc: Any, source: str) -> dict[str, Any]:
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise ConfigError([f"top level must be a mapping with keys {', '.join(_YAML_TOP_KEYS)}"], source=source)
    problems = []
    for key in doc:
        if key not in _YAML_TOP_KEYS:
            problems.append(f"{key}: unknown top-level key{did_you_mean(str(key), _YAML_TOP_KEYS)}; "
                            f"valid: {', '.join(_YAML_TOP_KEYS)}")
        elif key != "embodied" and doc[key] is not None and not isinstance(doc[key], Mapping):
            problems.append(f"{key}: expected a mapping, got {type(doc[key]).__name__}")
    if problems:
        raise ConfigError(problems, source=source)
    return {k: dict(v or {}) for k, v in doc.items() if k in SECTIONS or k == _MIXTURE_KEY}


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Reads a config YAML (``training:``/``model:``/``data:``/``plugins:``/``data_mixture:``; ``embodied:`` is
    provenance, ignored)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--config-file {path}: no such file")
    from embodied_core.documents import load_yaml_text, read_text_bounded

    try:
        text = read_text_bounded(path, error=ConfigError)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"cannot read it ({type(exc).__name__}: {exc})"], source=str(path)) from None
    # size, depth and alias expansion bounded: a config may come from someone else
    return _check_document(load_yaml_text(text, source=str(path), error=ConfigError), str(path))


def read_package_yaml(resource: str) -> dict[str, Any]:
    """Reads a model's default YAML named ``"package:relative/path.yaml"``."""
    from embodied_core.documents import load_yaml_text

    package, _, relative = resource.partition(":")
    text = importlib.resources.files(package).joinpath(relative).read_text()
    return _check_document(load_yaml_text(text, source=resource, error=ConfigError), resource)


def flag_name(field_name: str) -> str:
    """``train_iters`` -> ``--train-iters``."""
    return "--" + field_name.replace("_", "-")


def env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """``EMBODIED_TRAIN_ITERS=20`` -> ``{"training": {"train_iters": RawStr("20")}}``.

    An ``EMBODIED_*`` variable that names no flag is an error (a typo must not be silently ignored).
    """
    from embodied_core.config.aliases import canonical_training, field_aliases

    fields = {f.name for f in attrs.fields(TrainingArgs)} | set(field_aliases())
    values: dict[str, Any] = {}
    problems = []
    for key, raw in sorted(environ.items()):
        if not key.startswith(ENV_PREFIX) or key in RESERVED_ENV_VARS:
            continue
        name = key[len(ENV_PREFIX):].lower()
        if name in fields:
            values[name] = RawStr(raw)
        else:
            problems.append(f"{key}: names no flag {flag_name(name)}{did_you_mean(name, fields)}")
    if problems:
        raise ConfigError(problems, source="environment")
    return {"training": canonical_training(values, source="environment")} if values else {}


def is_dotlist_item(token: str) -> bool:
    """True for ``model.x=1`` / ``data.y=2`` / ``training.z=3`` / ``plugins.name.x=4`` tokens."""
    return _DOTLIST_RE.match(token) is not None


def dotlist_layer(items: Iterable[str]) -> dict[str, Any]:
    """``["model.hidden_dim=64", "data.image_size=[96,96]"]`` -> nested mapping of RawStr values."""
    layer: dict[str, Any] = {}
    for item in items:
        match = _DOTLIST_RE.match(item)
        if match is None:
            raise ConfigError([f"{item!r}: expected section.key=value with section one of {', '.join(SECTIONS)}"],
                              source="dotlist")
        section, dotted, value = match.groups()
        node = layer.setdefault(section, {})
        *parents, leaf = dotted.replace("-", "_").split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = RawStr(value)
    return layer
