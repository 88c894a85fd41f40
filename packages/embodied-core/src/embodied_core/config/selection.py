"""Which plugins a run selects: one list used by validation, ``--help``, ``config.yaml`` and the loggers.

A plugin is selected by its flag (``--optimizer AdamW``), by the dataset format's ``uses_flags``
(``--dataset-strategy``, ``--video-backend``), by the launch (the distributed strategy of a multi-process
run; a single process runs the core ``single`` strategy), or, for loggers and hooks, by being installed
(``--loggers`` narrows the loggers) and not named in ``--block-plugins``.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from embodied_core import registry
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import EmbodiedError
from embodied_core.registry import DatasetFormatSpec, groups

__all__ = ["BLOCKABLE_GROUPS", "SINGLE_PROCESS_STRATEGIES", "Selection", "distributed_strategy_name",
           "selected_loggers", "selected_plugins"]

SINGLE_PROCESS_STRATEGIES = ("ddp", "fsdp")
"""FLAGS.md: a single process runs without wrapping (the ``single`` strategy), whichever of these is named."""

BLOCKABLE_GROUPS = (groups.LOGGERS, groups.HOOKS)
"""Groups whose installed plugins all run unless ``--block-plugins`` names them."""

_BY_FLAG: tuple[tuple[str, str], ...] = (
    ("trainer_type", groups.TRAINERS),
    ("dataset_format", groups.DATASET_FORMATS),
    ("distributed_sampler_mode", groups.SAMPLERS),
    ("optimizer", groups.OPTIMIZERS),
    ("lr_decay_style", groups.LR_SCHEDULERS),
)
_BY_FORMAT = (("dataset_strategy", groups.DATASET_STRATEGIES), ("video_backend", groups.VIDEO_BACKENDS))


@attrs.frozen
class Selection:
    """One selected plugin and the flag that selects it (named in messages)."""

    group: str
    name: str
    flag: str


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def distributed_strategy_name(args: TrainingArgs, world_size: int) -> str:
    """The strategy a launch runs: ``--distributed-strategy``, or ``single`` for one process with ddp/fsdp."""
    if world_size == 1 and args.distributed_strategy in SINGLE_PROCESS_STRATEGIES:
        return "single"
    return args.distributed_strategy


def selected_loggers(args: TrainingArgs) -> list[str]:
    """``--loggers`` (every installed logger when unset), minus ``--block-plugins``, in order."""
    names = registry.names(groups.LOGGERS) if args.loggers is None else list(dict.fromkeys(args.loggers))
    return [name for name in names if name not in args.block_plugins]


def _format_selections(args: TrainingArgs) -> list[Selection]:
    try:
        spec = registry.get_spec(groups.DATASET_FORMATS, args.dataset_format)
    except EmbodiedError:
        return []  # validation reports the format itself
    if not isinstance(spec, DatasetFormatSpec):
        return []
    return [Selection(group, getattr(args, field), _flag(field)) for field, group in _BY_FORMAT
            if field in spec.uses_flags]


def selected_plugins(args: TrainingArgs, *, model_name: str | None, world_size: int,
                     hooks: Iterable[str] | None = None) -> list[Selection]:
    """Every plugin the run uses, the model first, in a stable order.

    Args:
        model_name: ``--model-name`` (None leaves the model out).
        world_size: processes of the launch (decides the distributed strategy).
        hooks: names of the hook plugins in use; default: every installed ``embodied.hooks`` entry not blocked.
    """
    out = [Selection(groups.MODELS, model_name, "--model-name")] if model_name else []
    out += [Selection(group, getattr(args, field), _flag(field)) for field, group in _BY_FLAG]
    out += _format_selections(args)
    out.append(Selection(groups.DISTRIBUTED_STRATEGIES, distributed_strategy_name(args, world_size),
                         "--distributed-strategy"))
    out += [Selection(groups.LOGGERS, name, "--loggers") for name in selected_loggers(args)]
    if hooks is None:
        hooks = [name for name in registry.names(groups.HOOKS) if name not in args.block_plugins]
    out += [Selection(groups.HOOKS, name, "--block-plugins") for name in hooks]
    return out
