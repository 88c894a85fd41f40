"""Spec of the ``dummy_datasets`` format (named by its entry point; imports no torch)."""

from __future__ import annotations

from embodied_core.registry import DatasetFormatSpec

__all__ = ["DUMMY_DATASETS"]

DUMMY_DATASETS = DatasetFormatSpec(
    name="dummy_datasets",
    description="random samples with the LeRobot keys, shaped from the model's DataConfig",
    factory="embodied_data.formats.dummy:build_dummy_dataset",
    uses_flags=("num_samples", "streaming"),
    needs_path=False,
    infer="embodied_data.formats.dummy:infer_dummy_features",
)
