"""Validation of a structured :class:`RunConfig` before anything heavy is built.

Checks plugin names against the registry, packages that plugins require, rules spanning fields, flags the
selected plugins do not read, and features not available yet. Every problem is reported at once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import attrs

from embodied_core import registry
from embodied_core.config.layers import flag_name
from embodied_core.config.run_config import RunConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.distributed.validation import distributed_problems
from embodied_core.errors import ConfigError, EmbodiedError, NotSupportedYetError, PluginLoadError, UsageError
from embodied_core.registry import groups
from embodied_core.registry.specs import DatasetFormatSpec

__all__ = ["FORMAT_SPECIFIC_FLAGS", "parse_lr_groups", "validate_run_config", "world_size_from_env"]

FORMAT_SPECIFIC_FLAGS = (
    "dataset_path", "split", "num_samples", "lerobotdataset_version", "dataset_strategy", "video_backend",
    "robot_type", "streaming",
)
"""Data flags read only by the formats whose spec lists them in ``uses_flags`` (or ``needs_path``)."""

_PLUGIN_FLAGS: tuple[tuple[str, str], ...] = (
    ("trainer_type", groups.TRAINERS),
    ("dataset_format", groups.DATASET_FORMATS),
    ("distributed_sampler_mode", groups.SAMPLERS),
    ("optimizer", groups.OPTIMIZERS),
    ("lr_decay_style", groups.LR_SCHEDULERS),
)
_FORMAT_PLUGIN_FLAGS = (("dataset_strategy", groups.DATASET_STRATEGIES), ("video_backend", groups.VIDEO_BACKENDS))

_SINGLE_PROCESS_STRATEGIES = ("ddp", "fsdp")
"""FLAGS.md: a single process runs without wrapping, whichever of these is named."""

def _not_default(field: str) -> Callable[[Any], bool]:
    default = attrs.fields_dict(TrainingArgs)[field].default
    default = default.factory() if isinstance(default, attrs.Factory) else default  # type: ignore[attr-defined]
    return lambda value: value != default


NOT_SUPPORTED_YET: dict[str, tuple[Callable[[Any], bool], str]] = {}
"""Flag -> (is the value unsupported?, the feature that makes it work). Shrinks as features land."""

_LR_GROUP_RE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=\s*([^,=]+?)\s*$")


def world_size_from_env(environ: Any = None) -> int:
    """WORLD_SIZE of a torchrun-style launch (1 when unset)."""
    environ = os.environ if environ is None else environ
    raw = environ.get("WORLD_SIZE", "1")
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"environment WORLD_SIZE={raw!r} is not an integer") from None


def parse_lr_groups(text: str | None) -> list[tuple[str, float]]:
    """``"vision=1e-5,head=1e-3"`` -> ``[("vision", 1e-5), ("head", 1e-3)]`` (order kept); ValueError if malformed."""
    if not text:
        return []
    groups_: list[tuple[str, float]] = []
    for item in text.split(","):
        match = _LR_GROUP_RE.match(item)
        if match is None:
            raise ValueError(f"cannot parse {item!r}; expected 'module.path=lr' items separated by commas")
        path, lr_text = match.groups()
        try:
            lr = float(lr_text)
        except ValueError:
            raise ValueError(f"{item!r}: learning rate {lr_text!r} is not a number") from None
        if lr < 0:
            raise ValueError(f"{item!r}: learning rate must be >= 0")
        groups_.append((path, lr))
    return groups_


def _check_plugin(group: str, name: str, flag: str, problems: list[str]) -> None:
    try:
        spec = registry.get_spec(group, name, flag=flag)
    except UsageError as exc:
        problems.append(str(exc))
        return
    except PluginLoadError as exc:
        problems.append(str(exc))
        return
    missing = spec.missing_requirements()
    if missing:
        hint = f" ({spec.install_hint})" if spec.install_hint else ""
        problems.append(f"{flag} {name}: needs the package(s) {', '.join(missing)}, which are not installed{hint}")


def _check_plugins(args: TrainingArgs, world_size: int, problems: list[str]) -> DatasetFormatSpec | None:
    for field, group in _PLUGIN_FLAGS:
        _check_plugin(group, getattr(args, field), flag_name(field), problems)
    if world_size > 1 or args.distributed_strategy not in _SINGLE_PROCESS_STRATEGIES:
        _check_plugin(groups.DISTRIBUTED_STRATEGIES, args.distributed_strategy, "--distributed-strategy", problems)
    try:
        spec = registry.get_spec(groups.DATASET_FORMATS, args.dataset_format)
    except EmbodiedError:
        return None  # already reported above
    if not isinstance(spec, DatasetFormatSpec):
        problems.append(f"--dataset-format {args.dataset_format}: plugin is not a DatasetFormatSpec")
        return None
    for field, group in _FORMAT_PLUGIN_FLAGS:
        if field in spec.uses_flags:
            _check_plugin(group, getattr(args, field), flag_name(field), problems)
    return spec


def _check_format_flags(args: TrainingArgs, spec: DatasetFormatSpec, problems: list[str]) -> None:
    defaults = {f.name: f.default for f in attrs.fields(TrainingArgs)}
    used = set(spec.uses_flags) | ({"dataset_path"} if spec.needs_path else set())
    for field in FORMAT_SPECIFIC_FLAGS:
        if field not in used and getattr(args, field) != defaults[field]:
            problems.append(f"{flag_name(field)}: not read by --dataset-format {args.dataset_format} "
                            f"(it reads: {', '.join(flag_name(f) for f in sorted(used)) or 'none of the data flags'})")
    if spec.needs_path and not args.dataset_path:
        problems.append(f"--dataset-path is required with --dataset-format {args.dataset_format}")


MODEL_SPECIFIC_FLAGS = ("tokenizer_path",)
"""Flags read only by the models whose ModelSpec lists them in ``uses_flags``."""


def _check_model_flags(config: RunConfig, problems: list[str]) -> None:
    try:
        spec = registry.get_spec(groups.MODELS, config.model_name, flag="--model-name")
    except EmbodiedError:
        return  # reported where the model was resolved
    used = set(getattr(spec, "uses_flags", ()))
    for field in MODEL_SPECIFIC_FLAGS:
        if field not in used and getattr(config.training, field) is not None:
            problems.append(f"{flag_name(field)}: not read by --model-name {config.model_name} (it has no "
                            "tokenizer input); remove the flag")


def _check_cross_field(args: TrainingArgs, world_size: int, problems: list[str]) -> None:
    if args.resume and args.resume_from:
        problems.append("--resume and --resume-from exclude each other: --resume picks the newest checkpoint "
                        "of --output-dir, --resume-from a given one")
    if args.lr_decay_iters is not None and args.lr_decay_iters < args.lr_warmup_iters:
        problems.append(f"--lr-decay-iters {args.lr_decay_iters} is shorter than --lr-warmup-iters "
                        f"{args.lr_warmup_iters}")
    try:
        parse_lr_groups(args.lr_group)
    except ValueError as exc:
        problems.append(f"--lr-group: {exc}")
    if args.manual_gc_interval and not args.manual_gc:
        problems.append("--manual-gc-interval is set but --manual-gc is off; add --manual-gc")
    for rank in args.loss_log_rank:
        if rank < -1 or rank >= world_size:
            problems.append(f"--loss-log-rank: rank {rank} does not exist (world size {world_size}; -1 = mean)")
    if args.async_save and args.save_format != "dcp":
        problems.append(f"--async-save needs --save-format dcp (got {args.save_format})")


def _check_not_supported(args: TrainingArgs, world_size: int, problems: list[str]) -> None:
    for field, (unsupported, feature) in NOT_SUPPORTED_YET.items():
        value = getattr(args, field)
        if unsupported(value):
            problems.append(f"{flag_name(field)} {value!r}: not supported yet (arrives with {feature})")
    if world_size > 1 and not registry.names(groups.DISTRIBUTED_STRATEGIES):
        problems.append(f"WORLD_SIZE={world_size}: multi-process training needs a distributed strategy "
                        "plugin (install embodied-dist)")


Check = Callable[[RunConfig], list[str]]
_extra_checks: list[Check] = []


def add_check(check: Check) -> Check:
    """Registers an extra validation (used by features that validate their own flags)."""
    _extra_checks.append(check)
    return check


def validate_run_config(config: RunConfig, *, world_size: int | None = None) -> None:
    """Raises one ConfigError (or NotSupportedYetError) listing every problem of ``config``."""
    world_size = world_size_from_env() if world_size is None else world_size
    args = config.training
    problems: list[str] = []
    format_spec = _check_plugins(args, world_size, problems)
    if format_spec is not None:
        _check_format_flags(args, format_spec, problems)
    _check_model_flags(config, problems)
    _check_cross_field(args, world_size, problems)
    problems.extend(distributed_problems(args))
    problems.extend(config.model.validate())
    problems.extend(config.data.validate())
    for check in _extra_checks:
        problems.extend(check(config))
    unsupported: list[str] = []
    _check_not_supported(args, world_size, unsupported)
    if problems:
        raise ConfigError(problems + unsupported)
    if unsupported:
        raise NotSupportedYetError("\n".join(unsupported))
