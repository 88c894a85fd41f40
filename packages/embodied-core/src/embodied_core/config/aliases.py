"""Alias spellings of training flags (LoongForge's names for flags we spell differently).

An alias is declared on the canonical ``TrainingArgs`` field (``metadata={"aliases": (...)}``) and maps onto it
exactly: ``--polynomial-power 2`` / ``EMBODIED_POLYNOMIAL_POWER=2`` / ``training.polynomial_power=2`` / a YAML
``polynomial_power: 2`` all set ``lr_decay_power``. Giving both spellings with different values in one layer is
an error naming both.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from embodied_core.config.training_args import ALIASES_KEY, TrainingArgs
from embodied_core.errors import ConfigError

__all__ = ["canonical_flags", "canonical_training", "field_aliases"]


@functools.cache
def field_aliases() -> dict[str, str]:
    """``{alias field name: canonical field name}`` from the ``TrainingArgs`` field metadata."""
    return {alias: field.name for field in attrs.fields(TrainingArgs)
            for alias in field.metadata.get(ALIASES_KEY, ())}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def canonical_training(section: Mapping[str, Any] | None, *, source: str) -> dict[str, Any]:
    """``section`` (a ``training:`` mapping) with alias keys renamed to their canonical fields.

    Raises:
        ConfigError: the alias and its canonical field are both given, with different values.
    """
    out = dict(section or {})
    problems = []
    for alias, canonical in field_aliases().items():
        if alias not in out:
            continue
        value = out.pop(alias)
        if canonical in out and str(out[canonical]) != str(value):
            problems.append(f"{_flag(alias)} {value!r} and {_flag(canonical)} {out[canonical]!r}: {_flag(alias)} is "
                            f"an alias of {_flag(canonical)}; give one of them")
            continue
        out[canonical] = value
    if problems:
        raise ConfigError(problems, source=source)
    return out


def canonical_flags(argv: Sequence[str]) -> list[str]:
    """Command-line tokens with ``--alias`` / ``--alias=V`` spelled as the canonical flag."""
    renames = {_flag(alias): _flag(canonical) for alias, canonical in field_aliases().items()}
    out = []
    for token in argv:
        name, eq, value = token.partition("=")
        out.append(renames[name] + eq + value if name in renames else token)
    return out
