"""``DatasetFormatSpec.infer`` of ``hdf5_datasets``: the features of the files, from their structure alone.

Scanning reads HDF5 headers (dataset shapes and dtypes), no frames, so the model's unset ``data.state_dim``,
``data.action_dim`` and ``data.camera_keys`` are filled before anything heavy is built.
"""

from __future__ import annotations

from embodied_core.config.infer import FeatureMetadata
from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import UsageError
from embodied_core.protocols import DatasetFeature
from embodied_data.hdf5.layouts import scan_hdf5

__all__ = ["infer_hdf5_features"]

_CAMERA_KINDS = ("image", "jpeg")


def infer_hdf5_features(args: TrainingArgs, data_config: BaseDataConfig) -> FeatureMetadata:
    """The LeRobot keys of ``--dataset-path`` with their per-frame shapes (cameras in the files' order).

    Samples carry exactly these shapes, so an explicitly set dimension that disagrees is an error.
    Raises what the format's preflight reports (no path, unreadable files, unknown split).
    """
    if not args.dataset_path:
        raise UsageError("--dataset-path is required with --dataset-format hdf5_datasets")
    index = scan_hdf5(args.dataset_path, split=args.split)
    features = {key: DatasetFeature(key=key, dtype="image" if source.kind in _CAMERA_KINDS else "float32",
                                    shape=tuple(source.shape))
                for key, source in index.features.items()}
    return FeatureMetadata(features=features, source=f"{index.root} ({index.layout} layout)")
