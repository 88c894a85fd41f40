"""Entry-point spec of the ``lerobot_datasets`` format (imports no torch)."""

from __future__ import annotations

from embodied_core.registry import DatasetFormatSpec

LEROBOT_DATASETS = DatasetFormatSpec(
    name="lerobot_datasets",
    description="LeRobot v2.0 / v2.1 / v3.0 datasets on disk (parquet + mp4), with strategies and video backends",
    factory="embodied_data.lerobot.factory:build_dataset",
    requires=("pyarrow",),
    install_hint="pip install pyarrow",
    uses_flags=("split", "lerobotdataset_version", "dataset_strategy", "video_backend", "robot_type", "streaming"),
    needs_path=True,
    preflight="embodied_data.lerobot.factory:check_dataset",
    infer="embodied_data.lerobot.factory:infer_features",
)
