"""Rules of a :class:`RunConfig` that need only the config and the plugin registry.

Checks plugin names against the registry, loads every selected plugin (spec and factory) so a broken one
fails before anything heavy is built, packages that plugins require, the checks plugins declare, rules
spanning fields, flags the selected plugins do not read, and features not available yet. The whole run is
validated by :func:`embodied_core.validation.validate_run_config`, which adds the trainer's and the
distributed strategy's own rules; this module imports neither.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from embodied_core import registry
from embodied_core.config.layers import flag_name
from embodied_core.config.paths import tokenizer_path_problem
from embodied_core.config.run_config import RunConfig
from embodied_core.config.selection import BLOCKABLE_GROUPS, Selection, selected_plugins
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import EmbodiedError, IncompatiblePluginError, PluginLoadError, UsageError, did_you_mean
from embodied_core.registry import groups
from embodied_core.registry.specs import DatasetFormatSpec, PluginSpec

__all__ = ["FORMAT_SPECIFIC_FLAGS", "NOT_SUPPORTED_YET", "config_problems", "parse_lr_groups", "world_size_from_env"]

FORMAT_SPECIFIC_FLAGS = (
    "dataset_path", "split", "num_samples", "lerobotdataset_version", "dataset_strategy", "video_backend",
    "robot_type", "streaming",
)
"""Data flags read only by the formats whose spec lists them in ``uses_flags`` (or ``needs_path``)."""

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


def _remedy(selection: Selection) -> str:
    if selection.group == groups.LOGGERS:
        return f"leave it out of --loggers or block it with --block-plugins {selection.name}"
    if selection.group == groups.HOOKS:
        return f"block it with --block-plugins {selection.name}"
    return f"fix or reinstall it, or select another {selection.flag}"


def _load(selection: Selection) -> PluginSpec | None:
    """Loads the spec and the factory (the module, for a hook) of one selected plugin; raises UsageError."""
    group, name = selection.group, selection.name
    if group == groups.HOOKS:
        registry.load_object(registry.get_entry(group, name))
        return None
    spec = registry.get_spec(group, name, flag=selection.flag)
    missing = spec.missing_requirements()
    if missing:
        hint = f" ({spec.install_hint})" if spec.install_hint else ""
        raise UsageError(f"{selection.flag} {name}: needs the package(s) {', '.join(missing)}, which are not "
                         f"installed{hint}")
    registry.load_factory(group, name, flag=selection.flag)
    return spec


def _check_selected(config: RunConfig, selections: Iterable[Selection], problems: list[str]) -> None:
    """Loads every selected plugin and runs the checks it declares; each failure is one problem."""
    for selection in selections:
        try:
            spec = _load(selection)
        except (PluginLoadError, IncompatiblePluginError) as exc:
            problems.append(f"{exc}; {_remedy(selection)}")
            continue
        except UsageError as exc:
            problems.append(str(exc))
            continue
        if spec is None or not spec.checks:
            continue
        try:
            problems.extend(spec.run_checks(config))
        except Exception as exc:  # a broken check is the plugin's bug: name it instead of a traceback
            problems.append(f"{selection.flag} {selection.name}: its check {', '.join(spec.checks)} failed: "
                            f"{type(exc).__name__}: {exc}")


def _check_block_names(args: TrainingArgs, in_process: Iterable[str], problems: list[str]) -> None:
    known = {name for group in BLOCKABLE_GROUPS for name in registry.names(group)} | set(in_process)
    for name in args.block_plugins:
        if name not in known:
            problems.append(f"--block-plugins {name}: no installed logger or hook plugin has this name (installed: "
                            f"{', '.join(sorted(known)) or 'none'}){did_you_mean(name, known)}")


def _format_spec(args: TrainingArgs) -> DatasetFormatSpec | None:
    try:
        spec = registry.get_spec(groups.DATASET_FORMATS, args.dataset_format)
    except EmbodiedError:
        return None  # reported with the other selected plugins
    return spec if isinstance(spec, DatasetFormatSpec) else None


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
    tokenizer = config.training.tokenizer_path
    problem = tokenizer_path_problem(tokenizer) if "tokenizer_path" in used and tokenizer is not None else None
    if problem:
        problems.append(problem)


def _check_cross_field(args: TrainingArgs, world_size: int, problems: list[str], *, mixture: bool = False) -> None:
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
    if args.data_root_dir is not None and not args.dataset_path and not mixture:
        problems.append(f"--data-root-dir {args.data_root_dir}: resolves a relative --dataset-path, and none is "
                        "given; add --dataset-path or drop --data-root-dir")


def _check_not_supported(args: TrainingArgs, problems: list[str]) -> None:
    for field, (unsupported, feature) in NOT_SUPPORTED_YET.items():
        value = getattr(args, field)
        if unsupported(value):
            problems.append(f"{flag_name(field)} {value!r}: not supported yet (arrives with {feature})")


def config_problems(config: RunConfig, *, world_size: int, plugins: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """``(problems, not_supported_yet)`` of ``config``: plugins, plugin checks, flags and cross-field rules.

    Args:
        world_size: processes of the launch.
        plugins: names of in-process hook plugins (``Trainer(plugins=...)``), valid in ``--block-plugins``.
    """
    args = config.training
    problems: list[str] = []
    _check_selected(config, selected_plugins(args, model_name=config.model_name, world_size=world_size), problems)
    format_spec = _format_spec(args)
    if config.data_mixture is not None:  # each entry's flags, formats, strategies (config.mixture_check)
        from embodied_core.config.mixture_check import mixture_problems

        problems.extend(mixture_problems(config))
    elif format_spec is not None:
        _check_format_flags(args, format_spec, problems)
    _check_model_flags(config, problems)
    _check_block_names(args, plugins, problems)
    _check_cross_field(args, world_size, problems, mixture=config.data_mixture is not None)
    unsupported: list[str] = []
    _check_not_supported(args, unsupported)
    return problems, unsupported
