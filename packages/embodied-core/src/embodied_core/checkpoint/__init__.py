"""Checkpoints (DESIGN 7): layout, atomic writes, formats, guarded readers, validation, key maps.

Modules: ``layout`` (names, lookup), ``writer`` (atomic commit/prune), ``contract`` (what a format provides),
``file_format`` (safetensors/pt), ``dcp`` (sharded), ``dcp_reader`` (DCP reading that runs no code),
``readers`` (guarded file readers), ``validate`` (checks before a resume), ``keymap`` (key maps and the strict
load report), ``pretrained`` (``--pretrained-checkpoint``), ``checkpointer`` (the trainer's facade).
"""

from embodied_core.checkpoint.layout import (
    META_FILE,
    MODEL_PT,
    MODEL_SAFETENSORS,
    TRAINING_STATE_DIR,
    checkpoints_root,
    find_latest,
    list_checkpoints,
    list_step_dirs,
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
    "list_step_dirs",
    "point_latest_to",
    "read_meta",
    "remove_stale_temporaries",
    "step_dir",
]
