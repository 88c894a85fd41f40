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


def _cli_class(model_cls: type, data_cls: type) -> type:
    """An attrs class with the training flags at top level and ``--model.*`` / ``--data.*`` groups."""
    return attrs.make_class(
        "TrainCommand",
        {
            "training": attrs.field(type=Annotated[TrainingArgs, tyro.conf.OmitArgPrefixes,
                                                   tyro.conf.arg(name="")]),
            "model": attrs.field(type=model_cls),
            "data": attrs.field(type=data_cls),
        },
        kw_only=True,
    )


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
    flags, dotlist = split_argv(argv, boolean_flags(TrainingArgs))
    if wants_help(flags) and not _model_selected(flags, dotlist, environ):
        with attrs.validators.disabled():
            tyro.cli(TrainingArgs, args=normalize_values(flags, value_kinds(TrainingArgs)), prog=_PROG,
                     description=_description())

    from embodied_core.config.resolve import merged_layers, structure_sections

    merged, spec = merged_layers(config_file=scan_value(flags, "--config-file"),
                                 model_name=scan_value(flags, "--model-name"), overrides=dotlist, environ=environ)
    base = structure_sections(merged, spec, source="defaults, YAML, environment and dotlist")
    cli_cls = _cli_class(spec.model_config, spec.data_config)
    bools = boolean_flags(TrainingArgs) | boolean_flags(spec.model_config, "model.") | \
        boolean_flags(spec.data_config, "data.")
    flags, dotlist = split_argv(argv, bools)
    kinds = value_kinds(TrainingArgs)
    kinds.update(value_kinds(spec.model_config, "model."))
    kinds.update(value_kinds(spec.data_config, "data."))
    flags = normalize_values(flags, kinds)
    default = cli_cls(training=base.training, model=base.model, data=base.data)
    with attrs.validators.disabled():  # validators run below, all problems at once
        parsed = tyro.cli(cli_cls, args=flags, default=default, prog=_PROG, description=_description())
    return _restructure(parsed, spec)


def _restructure(parsed: Any, spec: Any) -> RunConfig:
    from embodied_core.config.converter import structure, unstructure
    from embodied_core.config.run_config import RunConfig
    from embodied_core.errors import ConfigError

    problems: list[str] = []
    parts: dict[str, Any] = {}
    for section, cls in (("training", TrainingArgs), ("model", spec.model_config), ("data", spec.data_config)):
        try:
            parts[section] = structure(unstructure(getattr(parsed, section)), cls, path=section)
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
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
