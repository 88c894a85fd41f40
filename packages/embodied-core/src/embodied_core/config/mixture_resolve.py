"""What each entry of a dataset mixture reads: its flags, its data section, and the model-level data section.

- An entry's flags are the run's ``TrainingArgs`` with the entry's own values (path, split / episodes, format,
  strategy, robot type, version, video backend) in place (:func:`entry_args`).
- An entry's data section is the run's ``data:`` section with the entry's ``data:`` overrides, structured strictly
  (:func:`entry_data_config`), and what the model maps its ``embodiment`` tag to (:func:`embodiment_fields`).
  :func:`resolve_mixture_fields` fills, per entry, the inferable fields (``camera_keys``, ``state_dim``,
  ``action_dim``, ``*_names``) its dataset format reads from the metadata and writes them into the entry's
  ``data:`` overrides, so each entry's transform sees its own widths and cameras, and the ``config.yaml`` a run
  writes records them.
- The model-level data section (the model is built from it) takes the widest state and action of the entries
  (every entry's transform pads to the model's max dims, with masks where the model has them) and the first
  entry's cameras and names for the fields the user left unset.

Imports no torch and reads metadata only.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import attrs

from embodied_core import registry
from embodied_core.config.converter import structure, unstructure
from embodied_core.config.infer import disagreements, fill_unset
from embodied_core.config.mixture import MixtureEntry, entry_label
from embodied_core.config.model_config import INFERRED_FIELDS, BaseDataConfig
from embodied_core.config.run_config import RunConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError, EmbodiedError
from embodied_core.registry import groups
from embodied_core.registry.specs import DatasetFormatSpec

__all__ = ["embodiment_fields", "entry_args", "entry_data_config", "entry_run_config", "entry_run_configs",
           "resolve_mixture_fields"]

logger = logging.getLogger("embodied.config")


def entry_args(args: TrainingArgs, entry: MixtureEntry) -> TrainingArgs:
    """The run's flags as this entry reads them (its own values where it sets them)."""
    own = {"dataset_format": entry.dataset_format, "dataset_strategy": entry.dataset_strategy,
           "robot_type": entry.robot_type, "lerobotdataset_version": entry.lerobotdataset_version,
           "video_backend": entry.video_backend}
    return attrs.evolve(args, dataset_path=entry.path, split=entry.split_flag(args.split), dataset_mixture=None,
                        **{name: value for name, value in own.items() if value is not None})


def entry_data_config(config: RunConfig, index: int) -> BaseDataConfig:
    """The run's data section with entry ``index``'s ``data:`` overrides (strict: unknown keys, wrong types)."""
    assert config.data_mixture is not None, "entry_data_config needs a mixture"
    entry = config.data_mixture.entries[index]
    if not entry.data:
        return config.data
    merged = {**unstructure(config.data), **entry.data}
    return structure(merged, type(config.data), path=f"{entry_label(index, entry)}.data")


def entry_run_config(config: RunConfig, index: int) -> RunConfig:
    """The run as entry ``index`` alone would be configured (its flags and data section, no mixture)."""
    assert config.data_mixture is not None, "entry_run_config needs a mixture"
    entry = config.data_mixture.entries[index]
    return attrs.evolve(config, training=entry_args(config.training, entry), data=entry_data_config(config, index),
                        data_mixture=None)


def entry_run_configs(config: RunConfig) -> list[RunConfig]:
    """:func:`entry_run_config` of every entry, in order; one ConfigError naming every bad ``data:`` override."""
    assert config.data_mixture is not None, "entry_run_configs needs a mixture"
    out, problems = [], []
    for index in range(len(config.data_mixture.entries)):
        try:
            out.append(entry_run_config(config, index))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems, source=config.data_mixture.source)
    return out


def _format_spec(name: str) -> DatasetFormatSpec | None:
    try:
        spec = registry.get_spec(groups.DATASET_FORMATS, name)
    except EmbodiedError:
        return None  # reported by validation with the installed names
    return spec if isinstance(spec, DatasetFormatSpec) else None


def embodiment_fields(data: BaseDataConfig, tag: str | None) -> dict[str, Any]:
    """The data fields a model maps an entry's ``embodiment`` tag to (its data section's ``embodiment_fields(tag)``:
    GR00T's and DreamZero's ``embodiment_tag`` for a tag they know), else nothing: the tag is then a label of the
    entry's statistics and inference interface only (pi0.5, SmolVLA; X-VLA takes ``data: {domain_id: N}``)."""
    hook = getattr(data, "embodiment_fields", None)
    return dict(hook(tag)) if tag is not None and callable(hook) else {}


def _filled_entry(config: RunConfig, index: int, problems: list[str]) -> MixtureEntry:
    """Entry ``index`` with the fields its embodiment tag maps to and the inferable data fields its dataset tells
    written into its ``data:`` overrides (explicit overrides win)."""
    assert config.data_mixture is not None
    entry = config.data_mixture.entries[index]
    mapped = {k: v for k, v in embodiment_fields(config.data, entry.embodiment).items() if k not in entry.data}
    if mapped:
        entry = attrs.evolve(entry, data={**entry.data, **mapped})
        mixture = config.data_mixture
        config = attrs.evolve(config, data_mixture=attrs.evolve(
            mixture, entries=[entry if i == index else e for i, e in enumerate(mixture.entries)]))
    entry_config = entry_run_config(config, index)
    spec = _format_spec(entry_config.training.dataset_format)
    if spec is None or spec.infer is None:
        return entry
    try:
        found = spec.run_infer(entry_config.training, entry_config.data)
    except EmbodiedError:
        return entry  # the entry's preflight reports it with its full context
    label = entry_label(index, entry)
    problems.extend(f"{label}: {p}" for p in disagreements(entry_config.data, found))
    _, filled = fill_unset(entry_config.data, found)
    if not filled:
        return entry
    return attrs.evolve(entry, data={**entry.data, **unstructure(filled)})


def _model_level(data: BaseDataConfig, entries: list[BaseDataConfig]) -> dict[str, Any]:
    """Values for the model-level data fields the user left unset: widest state/action, first entry's cameras, and
    names only when every entry has the same."""
    values: dict[str, Any] = {}
    for kind in ("state", "action"):
        widths = [getattr(e, f"{kind}_dim") for e in entries if getattr(e, f"{kind}_dim") is not None]
        if getattr(data, f"{kind}_dim") is None and widths:
            values[f"{kind}_dim"] = max(widths)
        names = [getattr(e, f"{kind}_names") for e in entries]
        width = values.get(f"{kind}_dim", getattr(data, f"{kind}_dim"))
        if (getattr(data, f"{kind}_names") is None and names[0] is not None and width == len(names[0])
                and all(n == names[0] for n in names)):
            values[f"{kind}_names"] = list(names[0])
    if data.camera_keys is None and entries[0].camera_keys is not None:
        values["camera_keys"] = list(entries[0].camera_keys)
    return values


def resolve_mixture_fields(config: RunConfig) -> RunConfig:
    """:func:`embodied_core.config.infer.resolve_data_fields` for a mixture (see the module docstring).

    Raises:
        ConfigError: an entry's ``data:`` override is malformed, or an explicitly set field disagrees with an
            entry's dataset; every problem together, each naming the entry.
    """
    mixture = config.data_mixture
    assert mixture is not None, "resolve_mixture_fields needs a mixture"
    problems: list[str] = []
    entries: list[MixtureEntry] = []
    for index, entry in enumerate(mixture.entries):
        try:
            entries.append(_filled_entry(config, index, problems))
        except ConfigError as exc:
            problems.extend(exc.problems)
            entries.append(entry)
    if problems:
        raise ConfigError(problems, source=mixture.source or "data_mixture")
    config = attrs.evolve(config, data_mixture=attrs.evolve(mixture, entries=entries))
    values = _model_level(config.data, [entry_data_config(config, i) for i in range(len(entries))])
    if not values:
        return config
    if os.environ.get("RANK", "0") == "0":
        logger.info("model-level data fields from the mixture's %d entries: %s", len(entries),
                    ", ".join(f"{name}={values[name]}" for name in INFERRED_FIELDS if name in values))
    return attrs.evolve(config, data=attrs.evolve(config.data, **values))
