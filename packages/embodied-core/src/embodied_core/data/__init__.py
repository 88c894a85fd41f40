"""Generic data plumbing used by the Trainer: the dataset protocol's defaults (:class:`MapDataset`), resumable
loader and index samplers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from embodied_core.data.map_dataset import MapDataset

__all__ = ["MapDataset"]


def __getattr__(name: str) -> Any:
    if name == "MapDataset":  # lazily: importing embodied_core.data stays free of numpy
        from embodied_core.data.map_dataset import MapDataset

        return MapDataset
    raise AttributeError(f"module 'embodied_core.data' has no attribute {name!r}")
