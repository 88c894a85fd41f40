"""attrs field validators shared by every config (core flags and model plugins' sections).

Messages name only the rule and the value; the converter prefixes the field's path (``model.width: ...``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["non_negative", "only", "positive", "probability"]


def positive(instance: object, attribute: attrs.Attribute, value: int | float | None) -> None:
    """``value > 0`` (None passes: optional fields)."""
    if value is not None and not value > 0:
        raise ValueError(f"must be > 0 (got {value!r})")


def non_negative(instance: object, attribute: attrs.Attribute, value: int | float | None) -> None:
    """``value >= 0`` (None passes)."""
    if value is not None and value < 0:
        raise ValueError(f"must be >= 0 (got {value!r})")


def probability(instance: object, attribute: attrs.Attribute, value: float) -> None:
    """``0 <= value <= 1``."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"must be in [0, 1] (got {value!r})")


def only(*supported: Any, why: str) -> Callable[[object, attrs.Attribute, Any], None]:
    """A validator accepting only ``supported`` values: a setting a reference exposes but we implement at one value.

    ``why`` says what the other values would need (shown after the value), e.g.
    ``only(False, why="the action-conditioned video expert is not ported")``.
    """
    choices = " or ".join(repr(v) for v in supported)

    def check(instance: object, attribute: attrs.Attribute, value: Any) -> None:
        if value not in supported:
            raise ValueError(f"only {choices} is supported (got {value!r}): {why}")

    return check
