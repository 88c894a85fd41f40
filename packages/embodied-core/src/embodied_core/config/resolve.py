"""Builds a :class:`RunConfig` from the layers, lowest to highest precedence:

attrs defaults < YAML (``--config-file``, else the model's default YAML) < ``EMBODIED_*`` environment
< dotlist (``model.x=...``) < explicit values (CLI flags, or keyword arguments of the Python API).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from embodied_core import registry
from embodied_core.config.aliases import canonical_training
from embodied_core.config.converter import structure
from embodied_core.config.infer import resolve_data_fields
from embodied_core.config.layers import deep_merge, dotlist_layer, env_layer, read_package_yaml, read_yaml
from embodied_core.config.mixture import MIXTURE_SECTION, structure_mixture, with_mixture
from embodied_core.config.options import SECTION, option_classes, structure_options
from embodied_core.config.paths import dataset_path_under_root
from embodied_core.config.run_config import RunConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.config.validate import world_size_from_env
from embodied_core.errors import ConfigError, UsageError
from embodied_core.registry.groups import MODELS
from embodied_core.registry.specs import ModelSpec

__all__ = ["load_config", "merged_layers", "model_spec", "select_model_name", "with_data_root"]


def model_spec(name: str) -> ModelSpec:
    """The spec of model plugin ``name`` (imports only its light spec module)."""
    spec = registry.get_spec(MODELS, name, flag="--model-name")
    if not isinstance(spec, ModelSpec):
        raise UsageError(f"--model-name {name}: plugin is a {type(spec).__name__}, not a ModelSpec")
    return spec


def select_model_name(*layers: Mapping[str, Any]) -> str:
    """The model name from the highest layer that sets ``training.model_name``; UsageError when none."""
    for layer in reversed(layers):
        name = layer.get("training", {}).get("model_name")
        if name is not None:
            return str(name)
    installed = ", ".join(registry.names(MODELS)) or "none installed"
    raise UsageError(f"--model-name is required; installed models: {installed}")


def merged_layers(
    *,
    config_file: str | None = None,
    model_name: str | None = None,
    overrides: Iterable[str] = (),
    explicit: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], ModelSpec]:
    """Merges every layer into one raw mapping and returns it with the selected model's spec.

    Args:
        config_file: YAML replacing the model's default YAML.
        model_name: the model plugin; may also come from the environment or the config file.
        overrides: dotlist items (``model.x=1``).
        explicit: highest-precedence values, ``{"training": {...}, "model": {...}, "data": {...}}``.
        environ: the environment (defaults to ``os.environ``).
    """
    environ = os.environ if environ is None else environ
    explicit = dict(explicit or {})
    if model_name is not None:
        explicit = deep_merge(explicit, {"training": {"model_name": model_name}})
    env = env_layer(environ)
    dotlist = dotlist_layer(overrides)
    config_file = config_file or _pick(explicit, dotlist, env, key="config_file")
    file_layer = read_yaml(config_file) if config_file else {}
    name = select_model_name(file_layer, env, dotlist, explicit)
    spec = model_spec(name)
    if not config_file and spec.default_yaml:
        file_layer = read_package_yaml(spec.default_yaml)
    merged: dict[str, Any] = {}
    sources = (config_file or spec.default_yaml or "YAML", "environment", "dotlist", "explicit values")
    for layer, source in zip((file_layer, env, dotlist, explicit), sources, strict=True):
        if "training" in layer:  # LoongForge spellings (--polynomial-power, ...) onto our fields
            layer = {**layer, "training": canonical_training(layer["training"], source=str(source))}
        merged = deep_merge(merged, layer)
    merged.setdefault("training", {})["model_name"] = name
    if config_file:
        merged["training"]["config_file"] = str(config_file)
    return merged, spec


def _pick(*layers: Mapping[str, Any], key: str) -> Any:
    for layer in layers:  # highest precedence first
        value = layer.get("training", {}).get(key)
        if value is not None:
            return str(value)
    return None


def _training_without(raw: Mapping[str, Any] | None, problems: list[str]) -> TrainingArgs | None:
    """The training section without the keys that failed (to find the selected plugins despite them), or None."""
    failed = {p.split(":", 1)[0].split(".")[1] for p in problems if p.startswith("training.")}
    try:
        with attrs.validators.disabled():
            return structure({k: v for k, v in (raw or {}).items() if k not in failed}, TrainingArgs, path="training")
    except ConfigError:
        return None


def structure_sections(merged: Mapping[str, Any], spec: ModelSpec, *, source: str) -> RunConfig:
    """Structures the sections (``plugins`` for the selected plugins with options), reporting every problem
    together: field errors of all sections and the ``validate()`` rules of the sections that structured."""
    problems: list[str] = []
    parts: dict[str, Any] = {}
    for section, cls in (("training", TrainingArgs), ("model", spec.model_config), ("data", spec.data_config)):
        try:
            parts[section] = structure(merged.get(section), cls, path=section)
        except ConfigError as exc:
            problems.extend(exc.problems)
    if merged.get(MIXTURE_SECTION) is not None:
        try:
            parts["data_mixture"] = structure_mixture(merged[MIXTURE_SECTION], source=source)
        except ConfigError as exc:
            problems.extend(exc.problems)
    training = parts.get("training") or _training_without(merged.get("training"), problems)
    if training is not None:
        classes, option_problems = option_classes(training, model_name=spec.name, world_size=world_size_from_env())
        parts["plugins"], structure_problems = structure_options(merged.get(SECTION), classes)
        problems += option_problems + structure_problems
    if problems:
        # the sections that did structure still get their own rules checked, so one run reports everything
        problems += [p for section in ("model", "data") if section in parts for p in parts[section].validate()]
        raise ConfigError(problems, source=source)
    return RunConfig(**parts)


def load_config(
    model_name: str | None = None,
    *,
    config_file: str | None = None,
    overrides: Iterable[str] = (),
    training: Mapping[str, Any] | None = None,
    model: Mapping[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunConfig:
    """Resolves and strictly structures a run configuration (the Python equivalent of the CLI).

    Args:
        model_name: model plugin (``--model-name``).
        config_file: YAML replacing the model's default YAML (``--config-file``).
        overrides: dotlist items such as ``"model.hidden_dim=64"``.
        training, model, data: explicit values with the precedence of CLI flags, keyed by field name.
        environ: environment for ``EMBODIED_*`` variables (defaults to ``os.environ``).

    Returns:
        The structured RunConfig, with the data fields left unset filled from the dataset's metadata where the
        dataset format can read it (:func:`embodied_core.config.infer.resolve_data_fields`). Cross-field and
        registry validation is done by :func:`embodied_core.config.validate.validate_run_config`.

    Raises:
        ConfigError: every problem found, each with its path.
        UsageError: unknown model, missing files.
    """
    explicit = {k: dict(v) for k, v in (("training", training), ("model", model), ("data", data)) if v}
    merged, spec = merged_layers(config_file=config_file, model_name=model_name, overrides=overrides,
                                 explicit=explicit, environ=environ)
    return resolve_data_fields(with_data_root(structure_sections(merged, spec, source="configuration")))


def with_data_root(config: RunConfig) -> RunConfig:
    """``config`` with a relative ``--dataset-path`` resolved against ``--data-root-dir``, and its dataset mixture
    loaded (``--dataset-mixture``), globs expanded and entry paths made absolute (idempotent)."""
    config = with_mixture(config)
    args = config.training
    path = dataset_path_under_root(args.dataset_path, args.data_root_dir)
    if path == args.dataset_path:
        return config
    return attrs.evolve(config, training=attrs.evolve(args, dataset_path=path))
