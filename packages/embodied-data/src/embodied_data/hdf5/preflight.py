"""Preflight of ``hdf5_datasets``: the checks that need only the files' structure, run before the model is built.

Opening the files and listing their groups reads HDF5 headers only (no frames), so a wrong ``--dataset-path``,
``--split`` or key is reported as a configuration error (exit 2) before ``config.yaml`` is written.
"""

from __future__ import annotations

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import EmbodiedError, did_you_mean
from embodied_data.hdf5.layouts import Hdf5Index, scan_hdf5

__all__ = ["check_hdf5_dataset", "missing_keys_problem"]


def missing_keys_problem(index: Hdf5Index, data_config: BaseDataConfig) -> str | None:
    """The message for keys the model asks for that the dataset lacks, or None when all are present."""
    available = list(index.features)
    wanted = [data_config.action_key, data_config.state_key, *data_config.camera_keys]
    missing = [key for key in wanted if key not in available]
    if not missing:
        return None
    named = [f"{key!r}{did_you_mean(key, available)}" for key in missing]
    return (f"{index.root} ({index.layout} layout) has no {', '.join(named)}; its keys: {', '.join(available)} "
            "(set data.camera_keys / data.state_key / data.action_key)")


def check_hdf5_dataset(args: TrainingArgs, data_config: BaseDataConfig) -> list[str]:
    """Problems of ``--dataset-path`` / ``--split`` / the model's keys found from the files' structure; [] when none."""
    if not args.dataset_path:
        return ["--dataset-path is required with --dataset-format hdf5_datasets (a robomimic .hdf5 file or a "
                "folder of ALOHA episode files)"]
    try:
        index = scan_hdf5(args.dataset_path, split=args.split)
    except EmbodiedError as exc:
        return [str(exc)]
    problem = missing_keys_problem(index, data_config)
    return [problem] if problem else []
