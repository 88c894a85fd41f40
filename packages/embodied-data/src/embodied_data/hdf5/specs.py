"""Spec of the ``hdf5_datasets`` format (named by its entry point; imports no torch)."""

from __future__ import annotations

from embodied_core.registry import DatasetFormatSpec

__all__ = ["HDF5_DATASETS"]

HDF5_DATASETS = DatasetFormatSpec(
    name="hdf5_datasets",
    description="robomimic (data/demo_N, mask/<split>) and ALOHA/ACT (one file per episode) HDF5 with LeRobot keys",
    factory="embodied_data.hdf5.dataset:build_hdf5_dataset",
    uses_flags=("split", "streaming"),
    needs_path=True,
    preflight="embodied_data.hdf5.preflight:check_hdf5_dataset",
    infer="embodied_data.hdf5.infer:infer_hdf5_features",
)
