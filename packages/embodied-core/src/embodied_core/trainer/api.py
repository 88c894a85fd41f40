"""``Trainer``: the programmatic entry point; does exactly what ``embodied train`` does."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from embodied_core import registry
from embodied_core.config.infer import resolve_data_fields, unresolved_fields
from embodied_core.config.resolve import load_config, model_spec, with_data_root
from embodied_core.config.run_config import RunConfig
from embodied_core.errors import ConfigError
from embodied_core.hooks import make_plugin_manager, plugin_name
from embodied_core.registry import DatasetFormatSpec, groups
from embodied_core.trainer.base import BaseTrainer, TrainResult
from embodied_core.validation import validate_run_config

__all__ = ["Trainer"]


class Trainer:
    """Validates a configuration, then trains with the selected ``--trainer-type``.

    Args:
        config: a :class:`RunConfig`, or a path to a config YAML (e.g. a run's ``config.yaml``), or a
            mapping ``{"training": {...}, "model": {...}, "data": {...}}`` of explicit values (with the
            precedence of CLI flags over the model's default YAML and the environment).
        plugins: hook implementation objects (see :mod:`embodied_core.hooks`).

    Example::

        from embodied_core import Trainer
        Trainer({"training": {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets",
                              "train_iters": 100}}).train()
    """

    def __init__(self, config: RunConfig | Mapping[str, Any] | str | os.PathLike[str], *,
                 plugins: Iterable[Any] = ()) -> None:
        if isinstance(config, (str, os.PathLike)):
            config = load_config(config_file=str(Path(config)))
        elif isinstance(config, Mapping):
            config = load_config(training=config.get("training"), model=config.get("model"),
                                 data=config.get("data"))
        # a relative --dataset-path under --data-root-dir, then the data fields left unset from the dataset's
        # metadata (both already done by load_config: then no-ops)
        config = resolve_data_fields(with_data_root(config))
        self.config: RunConfig = config
        self.plugins = list(plugins)
        validate_run_config(config, plugins=[plugin_name(p) for p in self.plugins])
        self._preflight_data()
        unresolved = unresolved_fields(config)
        if unresolved:
            raise ConfigError(unresolved, source=f"--dataset-format {config.training.dataset_format}")
        if config.training.tokenizer_path:
            # FLAGS.md: --tokenizer-path is also exported for tokenizer code that reads the environment.
            os.environ["TOKENIZER_PATH"] = config.training.tokenizer_path

    def _preflight_data(self) -> None:
        """Lets the dataset format check its metadata now, so data problems surface before the model is built."""
        args = self.config.training
        if self.config.data_mixture is not None:  # every entry's format, on the entry's own flags
            from embodied_core.config.mixture_check import mixture_preflight

            problems = mixture_preflight(self.config)
            if problems:
                raise ConfigError(problems, source=self.config.data_mixture.source or "data_mixture")
            return
        spec = registry.get_spec(groups.DATASET_FORMATS, args.dataset_format, flag="--dataset-format")
        problems = spec.run_preflight(args, self.config.data) if isinstance(spec, DatasetFormatSpec) else []
        if problems:
            raise ConfigError(problems, source=f"--dataset-path {args.dataset_path}")

    def build(self) -> BaseTrainer:
        """The trainer instance of ``--trainer-type`` (not set up yet)."""
        spec = model_spec(self.config.model_name)
        hooks = make_plugin_manager(self.plugins, blocked=self.config.training.block_plugins)
        trainer_type = self.config.training.trainer_type
        factory = registry.load_factory(groups.TRAINERS, trainer_type, flag="--trainer-type",
                                        options=self.config.plugins.get(trainer_type))
        return factory(self.config, model_spec=spec, hooks=hooks)

    def train(self) -> TrainResult:
        """Trains and returns the final step, output dir, last logged metrics and last checkpoint."""
        return self.build().train()
