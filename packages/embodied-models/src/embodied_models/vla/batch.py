"""``to`` / ``pin_memory`` for the VLA ports' attrs batch classes (one rule for every field, not one copy per port)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import attrs
import torch

__all__ = ["TensorFields"]

B = TypeVar("B", bound="TensorFields")


def _apply(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):  # SmolVLA's image slots: one tensor per camera
        return tuple(fn(v) if isinstance(v, torch.Tensor) else v for v in value)
    return value


class TensorFields:
    """Mixin of an attrs batch class: ``to(device)`` and ``pin_memory()`` copy every tensor field (and the tensors
    of tuple fields), leave None and other values as they are, and keep :attr:`host_fields` on the host."""

    __slots__ = ()
    host_fields: ClassVar[tuple[str, ...]] = ()
    """Fields ``to()`` leaves where they are (e.g. GR00T's sample indices, read on the CPU without a device sync)."""

    def map_tensors(self: B, fn: Callable[[torch.Tensor], torch.Tensor], *, skip: tuple[str, ...] = ()) -> B:
        """A copy with ``fn`` applied to the tensors of every field not in ``skip``."""
        return type(self)(**{field.name: getattr(self, field.name) if field.name in skip
                             else _apply(getattr(self, field.name), fn) for field in attrs.fields(type(self))})

    def to(self: B, device: torch.device | str) -> B:
        """A copy with every tensor but the :attr:`host_fields` on ``device`` (non-blocking; pin_memory makes it
        asynchronous)."""
        return self.map_tensors(lambda t: t.to(device, non_blocking=True), skip=self.host_fields)

    def pin_memory(self: B) -> B:
        """Pinned copy (DataLoader(pin_memory=True) calls it on custom batch types)."""
        return self.map_tensors(lambda t: t.pin_memory())
