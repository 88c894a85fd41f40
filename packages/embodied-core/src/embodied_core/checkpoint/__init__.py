"""Checkpoint layout and atomic writes (DESIGN 7)."""

from embodied_core.checkpoint.layout import (
    META_FILE,
    MODEL_PT,
    MODEL_SAFETENSORS,
    TRAINING_STATE_DIR,
    checkpoints_root,
    find_latest,
    list_checkpoints,
    read_meta,
    step_dir,
)
from embodied_core.checkpoint.writer import point_latest_to, remove_stale_temporaries

__all__ = [
    "META_FILE",
    "MODEL_PT",
    "MODEL_SAFETENSORS",
    "TRAINING_STATE_DIR",
    "checkpoints_root",
    "find_latest",
    "list_checkpoints",
    "point_latest_to",
    "read_meta",
    "remove_stale_temporaries",
    "step_dir",
]
