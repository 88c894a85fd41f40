"""Data fields the user left unset, filled from the dataset's feature metadata before the model is built.

``BaseDataConfig`` declares ``camera_keys``, ``state_dim``, ``action_dim``, ``state_names`` and ``action_names``
with a ``None`` default meaning "take it from the dataset". The selected dataset format names a function in
``DatasetFormatSpec.infer``: ``infer(args, data_config) -> FeatureMetadata``, the features the model will see
(LeRobot reads ``meta/info.json``, HDF5 the files' structure, ``dummy_datasets`` reports the shapes it generates).
:func:`resolve_data_fields` then

- fills every unset field: the state/action width and per-dimension names of ``data.state_key`` /
  ``data.action_key``, and the camera keys in the dataset's declared order;
- reports an explicitly set dimension or name list that disagrees with a binding dataset as an error naming
  the field, the dataset's value and where it was read (set values always win; nothing is silently replaced);
- logs the filled values on rank 0, so they are visible and land in ``config.yaml``.

This module imports no torch and reads no sample data: formats answer from metadata.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import attrs

from embodied_core import registry
from embodied_core.config.model_config import INFERRED_FIELDS, REQUIRED_DATA_FIELDS, BaseDataConfig
from embodied_core.config.run_config import RunConfig
from embodied_core.errors import ConfigError, EmbodiedError
from embodied_core.protocols import DatasetFeature
from embodied_core.registry import groups
from embodied_core.registry.specs import DatasetFormatSpec

__all__ = ["FeatureMetadata", "dataset_values", "disagreements", "fill_unset", "resolve_data_fields",
           "unresolved_fields"]

logger = logging.getLogger("embodied.config")


@attrs.frozen(kw_only=True)
class FeatureMetadata:
    """What a dataset format's ``infer`` function returns.

    Attributes:
        features: key -> :class:`~embodied_core.protocols.DatasetFeature`, in the dataset's declared order
            (cameras in their order), as samples will carry them (after a robot layout, for instance).
        source: the dataset file or folder named in messages and logs.
        binding: True when samples have exactly these shapes, so an explicitly set field that disagrees is an
            error; False when they only fill unset fields (a generated dataset follows whatever is set, and a
            dataset strategy may reshape the features).
        hint: appended to a disagreement message, e.g. ``" (or choose a layout with --robot-type)"``.
    """

    features: Mapping[str, DatasetFeature]
    source: str
    binding: bool = True
    hint: str = ""


def _vector(feature: DatasetFeature | None) -> tuple[int, tuple[str, ...] | None] | None:
    """(width, names) of a non-visual feature, names only when they cover every dimension; None otherwise."""
    if feature is None or feature.is_visual:
        return None
    width = int(feature.shape[-1]) if feature.shape else 1
    names = feature.names if feature.names is not None and len(feature.names) == width else None
    return width, names


def dataset_values(data_config: BaseDataConfig, found: FeatureMetadata) -> dict[str, Any]:
    """The value the dataset implies for each field of :data:`INFERRED_FIELDS` it can tell (others absent)."""
    values: dict[str, Any] = {"camera_keys": [key for key, f in found.features.items() if f.is_visual]}
    for kind, key in (("state", data_config.state_key), ("action", data_config.action_key)):
        vector = _vector(found.features.get(key))
        if vector is not None:
            values[f"{kind}_dim"] = vector[0]
            if vector[1] is not None:
                values[f"{kind}_names"] = list(vector[1])
    return values


def disagreements(data_config: BaseDataConfig, found: FeatureMetadata) -> list[str]:
    """Explicitly set dimensions and names that differ from a binding dataset's; [] when none (or not binding).

    Camera keys are not compared here: a subset of the dataset's cameras is a valid choice, and a camera the
    dataset lacks is reported by the format's preflight with the cameras it has.
    """
    if not found.binding:
        return []
    values = dataset_values(data_config, found)
    problems: list[str] = []
    for kind, key in (("state", data_config.state_key), ("action", data_config.action_key)):
        dim_field, names_field = f"{kind}_dim", f"{kind}_names"
        width, set_width = values.get(dim_field), getattr(data_config, dim_field)
        if width is not None and set_width is not None and set_width != width:
            problems.append(f"data.{dim_field}={set_width} but {key!r} of {found.source} has {width} values per "
                            f"frame; set data.{dim_field}={width}{found.hint}")
        names, set_names = values.get(names_field), getattr(data_config, names_field)
        if names is not None and set_names is not None and list(set_names) != names:
            problems.append(f"data.{names_field}={list(set_names)} but {key!r} of {found.source} names its values "
                            f"{names}; remove data.{names_field} to use the dataset's names{found.hint}")
    return problems


def fill_unset(data_config: BaseDataConfig, found: FeatureMetadata) -> tuple[BaseDataConfig, dict[str, Any]]:
    """``data_config`` with its unset (None) inferable fields taken from ``found``, and what was filled."""
    filled = {name: value for name, value in dataset_values(data_config, found).items()
              if getattr(data_config, name) is None}
    return (attrs.evolve(data_config, **filled) if filled else data_config), filled


def unresolved_fields(config: RunConfig) -> list[str]:
    """One message per required data field still unset after inference (the model cannot be built without it)."""
    fmt = config.training.dataset_format
    data = config.data
    keys = {"state_dim": data.state_key, "action_dim": data.action_key, "camera_keys": "observation.images.*"}
    return [f"data.{name} is not set and --dataset-format {fmt} gave no value for it (no {keys[name]!r} feature "
            f"in its metadata); set data.{name}=... in the YAML or on the command line"
            for name in REQUIRED_DATA_FIELDS if getattr(data, name) is None]


def _format_spec(config: RunConfig) -> DatasetFormatSpec | None:
    try:
        spec = registry.get_spec(groups.DATASET_FORMATS, config.training.dataset_format)
    except EmbodiedError:
        return None  # an unknown or broken format is reported by validation, with the installed names
    return spec if isinstance(spec, DatasetFormatSpec) else None


def _is_rank_zero() -> bool:
    return os.environ.get("RANK", "0") == "0"


def resolve_data_fields(config: RunConfig) -> RunConfig:
    """Fills the unset data fields of ``config`` from its dataset format's metadata (see the module docstring).

    Best effort when the dataset cannot be read (no format, no path, a broken dataset): the config comes back
    unchanged and the format's preflight reports the problem with its full context; :func:`unresolved_fields`
    names what stayed unset. Nothing to fill and nothing disagreeing: the same object comes back.

    Raises:
        ConfigError: explicitly set fields that disagree with a binding dataset, all of them together.
    """
    if config.data_mixture is not None:  # per entry, then the model-level fields (config.mixture_resolve)
        from embodied_core.config.mixture_resolve import resolve_mixture_fields

        return resolve_mixture_fields(config)
    spec = _format_spec(config)
    if spec is None or spec.infer is None:
        return config
    try:
        found = spec.run_infer(config.training, config.data)
    except EmbodiedError:
        return config
    problems = disagreements(config.data, found)
    if problems:
        raise ConfigError(problems, source=f"--dataset-path {config.training.dataset_path}")
    data, filled = fill_unset(config.data, found)
    if not filled:
        return config
    if _is_rank_zero():
        logger.info("data fields from %s: %s", found.source,
                    ", ".join(f"{name}={filled[name]}" for name in INFERRED_FIELDS if name in filled))
    return attrs.evolve(config, data=data)
