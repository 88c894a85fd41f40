"""``embodied train``: a tyro CLI generated in two phases.

Phase 1 finds the model (``--model-name``, ``EMBODIED_MODEL_NAME`` or the config file) without importing
torch or the model's code; phase 2 builds the parser from ``TrainingArgs`` plus that model's
``ModelConfig`` and ``DataConfig``, with defaults taken from the lower configuration layers (model YAML,
``--config-file``, environment, dotlist), so explicit flags win over all of them.

Imports are deferred: ``embodied train --help`` loads only tyro, attrs and the training args.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import attrs
import tyro

from embodied_core import registry
from embodied_core.cli._argv import boolean_flags, normalize_values, scan_value, split_argv, value_kinds, wants_help
from embodied_core.config.aliases import canonical_flags
from embodied_core.config.converter import RawStr
from embodied_core.config.layers import flag_name
from embodied_core.config.training_args import TrainingArgs
from embodied_core.registry.groups import MODELS

if TYPE_CHECKING:
    from embodied_core.config.run_config import RunConfig

__all__ = ["main", "parse_train_argv"]

_PROG = "embodied train"


def _description() -> str:
    models = ", ".join(registry.names(MODELS)) or "none installed"
    return ("Train a model plugin. Flags override dotlist items (model.x=1 data.y=2), which override "
            "EMBODIED_<FLAG> environment variables, which override the YAML (--config-file, else the model's "
            f"default YAML). Installed models: {models}. Add --model-name NAME --help to see its model and "
            "data fields.")


def _cli_class(model_cls: type | None, data_cls: type | None, plugins_cls: type | None) -> type:
    """An attrs class with the training flags at top level and ``--model.*`` / ``--data.*`` / ``--plugins.*``
    groups (each only when given)."""
    fields: dict[str, Any] = {
        "training": attrs.field(type=Annotated[TrainingArgs, tyro.conf.OmitArgPrefixes, tyro.conf.arg(name="")]),
    }
    for name, cls in (("model", model_cls), ("data", data_cls), ("plugins", plugins_cls)):
        if cls is not None:
            fields[name] = attrs.field(type=cls)
    return attrs.make_class("TrainCommand", fields, kw_only=True)


def _plugins_class(classes: dict[str, type]) -> type | None:
    """The ``plugins`` group: one field per selected plugin with options (None when there is none)."""
    if not classes:
        return None
    return attrs.make_class("plugins", {name: attrs.field(type=cls) for name, cls in classes.items()}, kw_only=True)


_SELECTING_FLAGS = ("trainer_type", "dataset_format", "distributed_sampler_mode", "optimizer", "lr_decay_style",
                    "dataset_strategy", "video_backend", "distributed_strategy")
_SELECTING_LIST_FLAGS = ("loggers", "block_plugins")


def _scan_list(flags: Sequence[str], name: str) -> list[str] | None:
    """The values of ``--name A B`` (up to the next flag) / ``--name=A,B``, or None when absent."""
    values = None
    for i, token in enumerate(flags):
        if token == name:
            values = []
            for item in flags[i + 1:]:
                if item.startswith("--"):
                    break
                values.append(item)
        elif token.startswith(name + "="):
            values = [v for v in token.split("=", 1)[1].split(",") if v]
    return values


def _selecting_values(flags: Sequence[str]) -> dict[str, RawStr]:
    """The flags that select plugins, as typed (they decide which plugins' options the parser offers)."""
    values: dict[str, RawStr] = {}
    for field in _SELECTING_FLAGS:
        value = scan_value(flags, flag_name(field))
        if value is not None:
            values[field] = RawStr(value)
    for field in _SELECTING_LIST_FLAGS:
        items = _scan_list(flags, flag_name(field))
        if items is not None:
            values[field] = RawStr(",".join(items))
    return values


def _model_selected(flags: Sequence[str], dotlist: Sequence[str], environ: dict[str, str]) -> bool:
    return (scan_value(flags, "--model-name") is not None or scan_value(flags, "--config-file") is not None
            or "EMBODIED_MODEL_NAME" in environ or "EMBODIED_CONFIG_FILE" in environ
            or any(d.startswith(("training.model_name=", "training.config_file=")) for d in dotlist))


def parse_train_argv(argv: Sequence[str], *, environ: dict[str, str] | None = None) -> RunConfig:
    """Parses ``embodied train`` arguments into a structured RunConfig (not yet validated).

    Raises:
        SystemExit: for ``--help`` (0) and tyro's own usage errors (2).
        UsageError: unknown model, unknown keys, wrong types, failed validators (all reported together).
    """
    environ = dict(os.environ) if environ is None else environ
    argv = canonical_flags(argv)  # LoongForge spellings (--polynomial-power, --num-cycles) onto our flags
    flags, dotlist = split_argv(argv, boolean_flags(TrainingArgs))
    selecting = _selecting_values(flags)
    if wants_help(flags) and not _model_selected(flags, dotlist, environ):
        _training_help(flags, selecting)

    from embodied_core.config.options import option_classes
    from embodied_core.config.resolve import merged_layers, structure_sections
    from embodied_core.config.validate import world_size_from_env

    merged, spec = merged_layers(config_file=scan_value(flags, "--config-file"),
                                 model_name=scan_value(flags, "--model-name"), overrides=dotlist, environ=environ,
                                 explicit={"training": selecting})
    base = structure_sections(merged, spec, source="defaults, YAML, environment and dotlist")
    classes, _ = option_classes(base.training, model_name=spec.name, world_size=world_size_from_env(environ))
    plugins_cls = _plugins_class(classes)
    cli_cls = _cli_class(spec.model_config, spec.data_config, plugins_cls)
    sections = [(TrainingArgs, ""), (spec.model_config, "model."), (spec.data_config, "data.")]
    sections += [(plugins_cls, "plugins.")] if plugins_cls is not None else []
    flags, dotlist = split_argv(argv, set().union(*(boolean_flags(cls, prefix) for cls, prefix in sections)))
    kinds: dict[str, str] = {}
    for cls, prefix in sections:
        kinds.update(value_kinds(cls, prefix))
    flags = normalize_values(flags, kinds)
    default = cli_cls(training=base.training, model=base.model, data=base.data,
                      **({"plugins": plugins_cls(**base.plugins)} if plugins_cls is not None else {}))
    with attrs.validators.disabled():  # validators run below, all problems at once
        parsed = tyro.cli(cli_cls, args=flags, default=default, prog=_PROG, description=_description())
    return attrs.evolve(_restructure(parsed, spec, classes), data_mixture=base.data_mixture)


def _training_help(flags: Sequence[str], selecting: dict[str, RawStr]) -> None:
    """``embodied train --help`` without a model: the training flags, and the options of plugins named by the flags
    given (``--lr-decay-style X --help``); plugins selected by default are not loaded, so this imports none."""
    from embodied_core.config.converter import structure
    from embodied_core.config.options import option_classes, structure_options
    from embodied_core.config.validate import world_size_from_env

    with attrs.validators.disabled():
        try:
            training = structure(dict(selecting), TrainingArgs, path="training")
        except Exception:  # a malformed selecting flag: tyro reports it while parsing below
            training = TrainingArgs()
        named = {item for value in selecting.values() for item in value.split(",")}
        classes, _ = option_classes(training, model_name=None, world_size=world_size_from_env(), only=named)
        plugins_cls = _plugins_class(classes)
        sections = [(TrainingArgs, "")] + ([(plugins_cls, "plugins.")] if plugins_cls is not None else [])
        kinds: dict[str, str] = {}
        for cls, prefix in sections:
            kinds.update(value_kinds(cls, prefix))
        args = normalize_values(flags, kinds)
        if plugins_cls is None:
            tyro.cli(TrainingArgs, args=args, prog=_PROG, description=_description())
        defaults, _ = structure_options({}, classes)
        cli_cls = _cli_class(None, None, plugins_cls)
        tyro.cli(cli_cls, args=args, default=cli_cls(training=TrainingArgs(), plugins=plugins_cls(**defaults)),
                 prog=_PROG, description=_description())


def _restructure(parsed: Any, spec: Any, classes: dict[str, type]) -> RunConfig:
    from embodied_core.config.converter import structure, unstructure
    from embodied_core.config.run_config import RunConfig
    from embodied_core.errors import ConfigError

    problems: list[str] = []
    parts: dict[str, Any] = {}
    sections = [("training", TrainingArgs), ("model", spec.model_config), ("data", spec.data_config)]
    for section, cls in sections:
        try:
            parts[section] = structure(unstructure(getattr(parsed, section)), cls, path=section)
        except ConfigError as exc:
            problems.extend(exc.problems)
    parts["plugins"] = {}
    for name, cls in classes.items():
        try:
            parts["plugins"][name] = structure(unstructure(getattr(parsed.plugins, name)), cls, path=f"plugins.{name}")
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        # the sections that did structure still get their own rules checked, so one run reports everything
        problems += [p for section in ("model", "data") if section in parts for p in parts[section].validate()]
        raise ConfigError(problems, source="flags")
    return RunConfig(**parts)


def main(argv: Sequence[str]) -> int:
    """Runs ``embodied train``; returns the exit code."""
    from embodied_core.cli._errors import run_guarded

    def run() -> int:
        config = parse_train_argv(argv)
        from embodied_core.trainer.api import Trainer

        Trainer(config).train()
        return 0

    return run_guarded(_PROG, run)
