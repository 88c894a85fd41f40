"""Reading a reference policy's config (lerobot's ``config.json``) field by field: the pieces the VLA ports share.

A port declares its tables (reference key -> ``model.*`` field and the reference's default; keys fixed to the values
the port implements; keys that configure the run or take no part in the computation) and composes these helpers:

- :func:`fixed_problems`: one message per fixed key whose value the port does not implement;
- :func:`warn_unknown`: keys no table knows, named in a warning (other lerobot / transformers versions write
  bookkeeping keys of their own, so a real checkpoint is not refused for one);
- :func:`disagreements`: the ``model.*`` fields where the reference's config and the model config differ;
- :func:`reference_config` / :func:`checkpoint_config_file`: the ``config.json`` that describes a checkpoint path.

No torch.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

__all__ = ["checkpoint_config_file", "disagreements", "fixed_problems", "reference_config", "same", "warn_unknown"]

logger = logging.getLogger("embodied.models.vla")
_WARNED: set[tuple[str, str, str]] = set()


def same(a: Any, b: Any) -> bool:
    """Config-value equality: bools only equal bools, numbers within float tolerance, lists/tuples item by item."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _name(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def fixed_problems(section: Mapping[str, Any], fixed: Mapping[str, tuple[Any, ...]], where: str = "") -> list[str]:
    """``<where>.<key> = <value> is not implemented by this port (supported: ...)`` for each key of ``fixed``
    (key -> the supported values) that ``section`` sets to another value."""
    problems = []
    for key, supported in fixed.items():
        if key in section and not any(same(section[key], value) for value in supported):
            choices = " or ".join(repr(v) for v in supported)
            problems.append(f"{_name(where, key)} = {section[key]!r} is not implemented by this port "
                            f"(supported: {choices})")
    return problems


def warn_unknown(section: Mapping[str, Any], known: Collection[str], *, where: str, source: str, port: str,
                 log: logging.Logger = logger) -> None:
    """Names each key of ``section`` outside ``known`` in a warning (once per file, section and key)."""
    for key in section:
        if key in known or (source, where, key) in _WARNED:
            continue
        _WARNED.add((source, where, key))
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        log.warning("%s: %s is not known to the %s port and is not read%s; if it changes the network, the result "
                    "will differ from the reference", source, _name(where, key), port, hint)


def disagreements(model_config: Any, fields: Mapping[str, Any], *, skip: Collection[str] = ()) -> list[str]:
    """``model.<field>=<reference> (checkpoint) vs <ours> (model)`` for each field (but ``skip``) that differs."""
    out = []
    for name, value in fields.items():
        if name in skip:
            continue
        ours = getattr(model_config, name)
        if not same(list(ours) if isinstance(ours, tuple) else ours, list(value) if isinstance(value, tuple)
                    else value):
            out.append(f"model.{name}={value!r} (checkpoint) vs {ours!r} (model)")
    return out


def checkpoint_config_file(source: str | Path) -> Path | None:
    """The ``config.json`` that describes a checkpoint path (beside the file, in the folder or its
    ``pretrained_model/``), or None."""
    path = Path(source)
    folder = path if path.is_dir() else path.parent
    for candidate in (folder / "config.json", folder / "pretrained_model" / "config.json"):
        if candidate.is_file():
            return candidate
    return None


def reference_config(source: str | Path, *, policy_type: str) -> tuple[Path, dict[str, Any]] | str | None:
    """The lerobot config of type ``policy_type`` describing ``source``: ``(path, document)``; None when there is no
    config.json or it describes something else (another policy, our own folder); a message when it is unreadable."""
    path = checkpoint_config_file(source)
    if path is None:
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"{path}: not readable JSON ({exc})"
    if not isinstance(doc, dict) or policy_type not in (doc.get("type"), doc.get("model_type")):
        return None
    return path, doc
