"""The entry-point groups of embodied (contract: these names never change)."""

from __future__ import annotations

MODELS = "embodied.models"
DATASET_FORMATS = "embodied.dataset_formats"
DATASET_STRATEGIES = "embodied.dataset_strategies"
VIDEO_BACKENDS = "embodied.video_backends"
TRAINERS = "embodied.trainers"
OPTIMIZERS = "embodied.optimizers"
LR_SCHEDULERS = "embodied.lr_schedulers"
DISTRIBUTED_STRATEGIES = "embodied.distributed_strategies"
SAMPLERS = "embodied.samplers"
LOGGERS = "embodied.loggers"
HOOKS = "embodied.hooks"
COMMANDS = "embodied.commands"
"""Sub-commands of the ``embodied`` CLI contributed by packages (``embodied data``, ``embodied checkpoint``)."""
ENVS = "embodied.envs"
"""Evaluation environments of ``embodied eval --env`` (``synth_reach``, ``pusht``, ...)."""
IMAGE_AUGMENTATIONS = "embodied.image_augmentations"
"""Image augmentation ops (``color_jitter``, ``random_crop``, ...) and presets (``lerobot``, ``openpi``, ...) of
``data.image_augmentation``."""

ALL_GROUPS: tuple[str, ...] = (
    MODELS,
    DATASET_FORMATS,
    DATASET_STRATEGIES,
    VIDEO_BACKENDS,
    TRAINERS,
    OPTIMIZERS,
    LR_SCHEDULERS,
    DISTRIBUTED_STRATEGIES,
    SAMPLERS,
    LOGGERS,
    HOOKS,
    COMMANDS,
    ENVS,
    IMAGE_AUGMENTATIONS,
)
