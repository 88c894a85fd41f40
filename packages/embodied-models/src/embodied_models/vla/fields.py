"""Config pieces the VLA ports share: field blocks (attrs mixins) and their placement (no torch).

A mixin's fields would come first in the subclass (attrs collects base-class fields before the class's own);
:func:`place_after` keeps them where the port always listed them, so ``--help``, the YAML and ``config.yaml`` keep
their order. Field docstrings live in the mixin's source, where ``--help`` (tyro) finds them through the MRO.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import attrs

from embodied_core.config.validators import positive

__all__ = ["FlowTimeFields", "LocalTokenizerPath", "place_after"]

FieldTransformer = Callable[[type, list[attrs.Attribute]], list[attrs.Attribute]]


def place_after(anchor: str, *blocks: type) -> FieldTransformer:
    """An attrs ``field_transformer`` that lists the fields inherited from ``blocks`` right after field ``anchor``.

    Use it on the class that mixes the blocks in (``@attrs.define(field_transformer=place_after(...))``); a
    subclass of that class collects fields anew and needs it again.
    """
    names = [field.name for block in blocks for field in attrs.fields(block)]

    def transform(cls: type, fields: list[attrs.Attribute]) -> list[attrs.Attribute]:
        moved = [f for name in names for f in fields if f.name == name and f.inherited]
        rest = [f for f in fields if f not in moved]
        position = next((i for i, f in enumerate(rest) if f.name == anchor), None)
        if position is None:
            raise TypeError(f"{cls.__name__}: place_after anchor {anchor!r} is not one of its fields")
        return [*rest[: position + 1], *moved, *rest[position + 1:]]

    return transform


@attrs.define(kw_only=True)
class FlowTimeFields:
    """The flow-time constants of the pi0 convention (openpi, which SmolVLA follows): training draws
    t ~ Beta(alpha, beta) * scale + offset (t = 1 is pure noise) and the network sees t through a sin-cos embedding
    with periods geometric in [min_period, max_period]. X-VLA and GR00T N1.7 use other conventions."""

    min_period: float = attrs.field(default=4e-3, validator=positive)
    """Shortest period of the sin-cos time embedding."""
    max_period: float = attrs.field(default=4.0, validator=positive)
    """Longest period of the sin-cos time embedding."""
    time_beta_alpha: float = attrs.field(default=1.5, validator=positive)
    """Training time t ~ Beta(alpha, beta) * scale + offset."""
    time_beta_beta: float = attrs.field(default=1.0, validator=positive)
    """See time_beta_alpha."""
    time_scale: float = attrs.field(default=0.999, validator=positive)
    """See time_beta_alpha."""
    time_offset: float = attrs.field(default=0.001, validator=positive)
    """See time_beta_alpha."""

    def flow_time_problems(self) -> list[str]:
        """The rule spanning these fields (for the port's ``validate``)."""
        if self.time_scale + self.time_offset > 1.0 + 1e-9:
            return [f"model.time_scale + model.time_offset must be <= 1 (got {self.time_scale} + "
                    f"{self.time_offset}): t = 1 is pure noise"]
        return []


class LocalTokenizerPath:
    """``resolved_tokenizer_path()`` for a data config with a ``tokenizer_path`` field (each port documents its own
    field: what folder it wants differs)."""

    __slots__ = ()
    tokenizer_path: str | None

    def resolved_tokenizer_path(self) -> str | None:
        """data.tokenizer_path, else the TOKENIZER_PATH environment variable (set from --tokenizer-path)."""
        return self.tokenizer_path or os.environ.get("TOKENIZER_PATH") or None
