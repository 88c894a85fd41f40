"""Validation of a dataset mixture, entry by entry, before any dataset or model is built.

Each problem names the entry (``data_mixture.entries[i] (path)``) and the field: an unknown dataset format,
strategy or video backend (with the installed names), a data flag the entry's format does not read, a bad
``data:`` override, and every rule the model plugin checks on its data section (``ModelSpec.checks``, the data
config's ``validate()``: a state wider than ``model.max_state_dim``, more cameras than image slots, ...) applied to
the entry as if it were trained alone. :func:`mixture_preflight` adds what the entries' formats find in their
metadata (missing files, wrong version, keys the dataset lacks).
"""

from __future__ import annotations

from embodied_core import registry
from embodied_core.config.mixture import entry_label
from embodied_core.config.mixture_resolve import entry_run_config
from embodied_core.config.run_config import RunConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError, EmbodiedError
from embodied_core.registry import groups
from embodied_core.registry.specs import DatasetFormatSpec

__all__ = ["mixture_preflight", "mixture_problems"]

_ENTRY_PLUGINS = (("dataset_format", groups.DATASET_FORMATS), ("dataset_strategy", groups.DATASET_STRATEGIES),
                  ("video_backend", groups.VIDEO_BACKENDS))


def _plugin_problems(label: str, args: TrainingArgs, spec: DatasetFormatSpec | None) -> list[str]:
    """Unknown or broken format / strategy / backend names (strategy and backend only where the format reads them)."""
    problems = []
    used = set(spec.uses_flags) if spec is not None else set()
    for field, group in _ENTRY_PLUGINS:
        if field != "dataset_format" and field not in used:
            continue
        name = getattr(args, field)
        try:
            registry.load_factory(group, name, flag=field)
        except EmbodiedError as exc:
            problems.append(f"{label}: {field}: {exc}")
    return problems


def _flag_problems(label: str, args: TrainingArgs, spec: DatasetFormatSpec) -> list[str]:
    """The data flags this entry sets that its format does not read (the rule of a single dataset)."""
    from embodied_core.config.validate import _check_format_flags

    found: list[str] = []
    _check_format_flags(args, spec, found)
    return [f"{label}: {p}" for p in found]


def _format_spec(args: TrainingArgs) -> DatasetFormatSpec | None:
    try:
        spec = registry.get_spec(groups.DATASET_FORMATS, args.dataset_format)
    except EmbodiedError:
        return None
    return spec if isinstance(spec, DatasetFormatSpec) else None


def _model_rules(label: str, entry_config: RunConfig) -> list[str]:
    """The model plugin's own data rules on this entry's data section."""
    problems = list(entry_config.data.validate())
    try:
        spec = registry.get_spec(groups.MODELS, entry_config.model_name, flag="--model-name")
        problems.extend(spec.run_checks(entry_config))
    except EmbodiedError:
        pass  # an unknown model is reported where the model is resolved
    except Exception as exc:  # a broken check is the plugin's bug: name it instead of a traceback
        problems.append(f"the model's checks failed on this entry: {type(exc).__name__}: {exc}")
    return [f"{label}: {p}" for p in problems]


def mixture_problems(config: RunConfig) -> list[str]:
    """Every problem of ``config.data_mixture`` found from the config and the registry alone (see module doc)."""
    mixture = config.data_mixture
    assert mixture is not None, "mixture_problems needs a mixture"
    problems: list[str] = []
    for index, entry in enumerate(mixture.entries):
        label = entry_label(index, entry)
        try:
            entry_config = entry_run_config(config, index)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        spec = _format_spec(entry_config.training)
        problems.extend(_plugin_problems(label, entry_config.training, spec))
        if spec is None:
            continue
        problems.extend(_flag_problems(label, entry_config.training, spec))
        problems.extend(_model_rules(label, entry_config))
    return problems


def mixture_preflight(config: RunConfig) -> list[str]:
    """What each entry's dataset format finds in its metadata (``DatasetFormatSpec.preflight``), per entry."""
    mixture = config.data_mixture
    assert mixture is not None, "mixture_preflight needs a mixture"
    problems: list[str] = []
    for index, entry in enumerate(mixture.entries):
        entry_config = entry_run_config(config, index)
        spec = _format_spec(entry_config.training)
        if spec is None:
            continue
        label = entry_label(index, entry)
        try:
            found = spec.run_preflight(entry_config.training, entry_config.data)
        except EmbodiedError as exc:
            found = [str(exc)]
        problems.extend(f"{label}: {p}" for p in found)
    return problems
