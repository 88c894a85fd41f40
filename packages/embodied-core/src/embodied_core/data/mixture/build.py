"""Builds a run's dataset mixture: the entries' datasets, statistics, transforms and the sampling schedule.

Per entry: the dataset its format builds with the entry's flags and data section
(:mod:`embodied_core.config.mixture_resolve`), its statistics (:func:`embodied_core.data.dataset.resolve_stats`) and
the model's transforms built for the entry's data section and the statistics of its embodiment:

- ``stats: per_entry``: entries with one ``embodiment`` tag share the statistics of their union
  (:func:`~embodied_core.data.mixture.stats.merge_stats`; an entry alone keeps exactly its own), each embodiment
  normalized with its own statistics (the GR00T / X-VLA convention);
- ``stats: merged``: every entry is normalized with the statistics of the union of all entries.

Entries of one embodiment must share the data section (they share one inference interface). Before training,
each entry's first sample goes through its transform and is collated with entry 0's: a layout the model cannot
batch together (a different number of views, an action chunk of another length, a key only one entry has) is a
UsageError naming the entry, the keys and both shapes, raised before the model is built (the trainer builds a
mixture first). The whole build runs under saved global RNG states, so it does not change the model's
initialization.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from embodied_core.config.converter import unstructure
from embodied_core.config.mixture import DataMixture, entry_label
from embodied_core.config.mixture_resolve import entry_run_configs
from embodied_core.config.run_config import RunConfig
from embodied_core.data.dataset import build_training_dataset, resolve_features, resolve_stats
from embodied_core.data.default_task import with_default_task
from embodied_core.data.mixture.dataset import MixtureDataset, MixtureTransform
from embodied_core.data.mixture.drawn import DrawnMixtureDataset, DrawnOrder, mixture_draw_path
from embodied_core.data.mixture.schedule import MixtureSchedule
from embodied_core.data.mixture.stats import merge_stats
from embodied_core.errors import ConfigError, DataError, EmbodiedError, UsageError
from embodied_core.model_api import Transforms
from embodied_core.protocols import DatasetFeature
from embodied_core.registry._paths import import_object

__all__ = ["EmbodimentRecord", "MixtureData", "build_mixture", "embodiment_tags"]


@attrs.frozen(kw_only=True)
class EmbodimentRecord:
    """One embodiment of a mixture, as the policy folder stores it.

    Attributes:
        tag: the embodiment tag (``predict_action(obs, embodiment=tag)``).
        entries: the mixture entries of this embodiment.
        data_config: their data section (the inference interface: cameras, keys, dims).
        stats: the statistics their transforms were built with (None: the model uses none).
        features: the first entry's feature metadata.
        fps: the first entry's frame rate.
    """

    tag: str
    entries: tuple[int, ...]
    data_config: Any
    stats: dict[str, dict[str, np.ndarray]] | None
    features: dict[str, DatasetFeature]
    fps: float | None


@attrs.frozen(kw_only=True)
class MixtureData:
    """What :func:`build_mixture` returns.

    Attributes:
        dataset: the entries' datasets as one dataset.
        order: the sampling schedule (the loader's epoch order).
        transforms: the training transforms (each entry's sample transform, entry 0's collate, the default
            embodiment's action postprocessing).
        embodiments: the embodiments by tag, in entry order; ``default_embodiment`` is entry 0's.
        labels: how messages name each entry.
        mixture: the section the mixture was built from (one entry for ``--dataset-path`` with a model that draws
            its own mixture).
    """

    dataset: MixtureDataset | DrawnMixtureDataset
    order: MixtureSchedule | DrawnOrder
    transforms: Transforms
    embodiments: dict[str, EmbodimentRecord]
    default_embodiment: str
    labels: list[str]
    mixture: DataMixture

    @property
    def default(self) -> EmbodimentRecord:
        """The default embodiment (entry 0's)."""
        return self.embodiments[self.default_embodiment]


def embodiment_tags(mixture: DataMixture) -> list[str]:
    """Each entry's embodiment tag: its ``embodiment``, else its name (or folder name), made unique among the
    entries without a tag (an untagged entry never joins another embodiment by accident)."""
    explicit = {e.embodiment for e in mixture.entries if e.embodiment is not None}
    tags: list[str] = []
    for index, entry in enumerate(mixture.entries):
        if entry.embodiment is not None:
            tags.append(entry.embodiment)
            continue
        tag = entry.name or Path(entry.path).name or f"entry{index}"
        tags.append(f"{tag}_{index}" if tag in explicit or tag in tags else tag)
    return tags


def _relabeled(exc: EmbodiedError, label: str) -> EmbodiedError:
    if isinstance(exc, ConfigError):
        return ConfigError([f"{label}: {p}" for p in exc.problems])
    return type(exc)(f"{label}: {exc}") if type(exc) in (UsageError, DataError) else DataError(f"{label}: {exc}")


def _build_entries(configs: Sequence[RunConfig], labels: Sequence[str]) -> list[Any]:
    datasets = []
    for config, label in zip(configs, labels, strict=True):
        try:
            dataset = build_training_dataset(config.training, config.data)
        except EmbodiedError as exc:
            raise _relabeled(exc, label) from None
        if len(dataset) == 0:
            raise DataError(f"{label}: the dataset has no samples (with its split / episodes and strategy)")
        datasets.append(dataset)
    return datasets


def _check_groups(tags: Sequence[str], configs: Sequence[RunConfig], labels: Sequence[str]) -> None:
    """Entries of one embodiment share its inference interface: their data sections must be equal."""
    first: dict[str, int] = {}
    problems = []
    for index, tag in enumerate(tags):
        if tag not in first:
            first[tag] = index
            continue
        a, b = unstructure(configs[first[tag]].data), unstructure(configs[index].data)
        differ = sorted(k for k in a if a[k] != b.get(k))
        if differ:
            problems.append(f"{labels[index]}: embodiment {tag!r} is also {labels[first[tag]]}'s, but their data "
                            f"sections differ in {', '.join(f'{k} ({a[k]!r} vs {b.get(k)!r})' for k in differ)}; "
                            "entries of one embodiment share one inference interface: give this entry its own tag")
    if problems:
        raise ConfigError(problems)


@contextlib.contextmanager
def _saved_rng() -> Iterator[None]:
    """The global Python / NumPy / torch (CPU) RNG states are restored after the block."""
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


def _shapes(sample: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for key, value in sample.items():
        shape = getattr(value, "shape", None)
        out[key] = f"{tuple(shape)} {str(getattr(value, 'dtype', '')).removeprefix('torch.')}".strip() \
            if shape is not None else type(value).__name__
    return out


def _probe(samples: Sequence[Any], transforms: Sequence[Transforms], labels: Sequence[str]) -> None:
    """Each entry's first sample, transformed, collated with entry 0's (module docstring)."""
    outputs = []
    for dataset, entry_transforms, label in zip(samples, transforms, labels, strict=True):
        sample = dataset[0]
        try:
            st = entry_transforms.sample_transform
            outputs.append(st(sample) if st is not None else sample)
        except EmbodiedError as exc:
            raise UsageError(f"{label}: the model's sample transform cannot read this entry's samples: {exc}; map "
                             "the entry with data: overrides (keys, cameras) or --robot-type") from None
    collate = transforms[0].collate_fn
    for index in range(1, len(outputs)):
        try:
            collate([outputs[0], outputs[index]])
        except Exception as exc:  # the model's collate names no entry: report the differing keys
            a, b = _shapes(outputs[0]), _shapes(outputs[index])
            differ = [f"{k!r}: {b.get(k, 'missing')} here, {a.get(k, 'missing')} in {labels[0]}"
                      for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
            detail = "; ".join(differ) if differ else f"{type(exc).__name__}: {exc}"
            raise UsageError(f"{labels[index]}: its samples cannot be batched with {labels[0]}'s after the model's "
                             f"transform ({detail}); map the entry into the model's input with data: overrides "
                             "(cameras, horizon, keys) or train it separately") from None


def _common_fps(datasets: Sequence[Any]) -> float | None:
    rates = {getattr(d, "fps", None) for d in datasets}
    return rates.pop() if len(rates) == 1 else None


def build_mixture(config: RunConfig, spec: Any, *, world_size: int = 1) -> MixtureData:
    """The mixture of ``config`` (see the module docstring).

    Args:
        config: a resolved and validated run configuration with a ``data_mixture``.
        spec: the model plugin's spec (its ``make_transforms``).
        world_size: processes of the run (the epoch is rounded to whole global batches).

    Raises:
        UsageError / ConfigError: entries that cannot be mapped into the model's input, statistics that cannot be
            merged, entries of one embodiment with different data sections; DataError: a dataset that cannot be
            read (each naming the entry).
    """
    assert config.data_mixture is not None, "build_mixture needs a mixture"
    with _saved_rng():  # the trainer builds a mixture before the model: leave the initialization's RNG untouched
        return _build(config, spec, world_size=world_size)


def _build(config: RunConfig, spec: Any, *, world_size: int) -> MixtureData:
    mixture = config.data_mixture
    assert mixture is not None
    args = config.training
    labels = [entry_label(i, e) for i, e in enumerate(mixture.entries)]
    configs = entry_run_configs(config)
    tags = embodiment_tags(mixture)
    _check_groups(tags, configs, labels)
    datasets = _build_entries(configs, labels)
    make_transforms = spec.load_transforms()
    entry_stats = ([resolve_stats(d, format_name=c.training.dataset_format) for d, c in zip(datasets, configs,
                                                                                            strict=True)]
                   if make_transforms is not None else None)
    sizes = [len(d) for d in datasets]
    by_tag = {tag: [i for i, t in enumerate(tags) if t == tag] for tag in dict.fromkeys(tags)}
    stats_of: dict[str, dict[str, dict[str, np.ndarray]] | None] = {}
    merged = None
    if entry_stats is not None and mixture.stats == "merged":
        merged = merge_stats(entry_stats, counts=sizes, labels=labels)
    for tag, members in by_tag.items():
        if entry_stats is None:
            stats_of[tag] = None
        elif merged is not None:
            stats_of[tag] = merged
        else:
            stats_of[tag] = merge_stats([entry_stats[i] for i in members], counts=[sizes[i] for i in members],
                                        labels=[labels[i] for i in members])
    built: dict[tuple[str, int], Transforms] = {}
    group_transforms: dict[str, Transforms] = {}
    for tag, members in by_tag.items():
        data = configs[members[0]].data
        key = (json.dumps(unstructure(data), sort_keys=True, default=str), id(stats_of[tag]))
        if key not in built:
            built[key] = (make_transforms(config.model, data, stats=stats_of[tag]) if make_transforms is not None
                          else Transforms())
        group_transforms[tag] = built[key]
    entry_transforms = [group_transforms[t] for t in tags]
    samples = [with_default_task(d, args.task_name) for d in datasets]
    _probe(samples, entry_transforms, labels)
    for dataset in datasets:  # the probe decoded frames here: release the decoders before workers fork
        close = getattr(dataset, "close", None)
        if callable(close):
            close()
    distinct = len({id(t) for t in entry_transforms}) > 1
    sample_transform = (MixtureTransform([t.sample_transform for t in entry_transforms]) if distinct
                        else entry_transforms[0].sample_transform)
    default = tags[0]
    transforms = Transforms(sample_transform=sample_transform, collate_fn=entry_transforms[0].collate_fn,
                            postprocess_actions=group_transforms[default].postprocess_actions)
    features = [resolve_features(d, format_name=c.training.dataset_format) for d, c in zip(datasets, configs,
                                                                                           strict=True)]
    embodiments = {tag: EmbodimentRecord(tag=tag, entries=tuple(members), data_config=configs[members[0]].data,
                                         stats=stats_of[tag], features=features[members[0]],
                                         fps=getattr(datasets[members[0]], "fps", None))
                   for tag, members in by_tag.items()}
    draw_path = mixture_draw_path(config.data)
    dataset: MixtureDataset | DrawnMixtureDataset
    order: MixtureSchedule | DrawnOrder
    if draw_path is not None:  # the model draws each sample itself (drawn.py)
        _check_drawn(config)
        draw = import_object(draw_path)(datasets, [e.weight for e in mixture.entries], seed=args.seed,
                                        data_config=config.data)
        dataset = DrawnMixtureDataset(samples, draw, features=features[0], tag_entries=distinct,
                                      fps=_common_fps(datasets))
        order = DrawnOrder(draw, seed=args.seed if mixture.seed is None else mixture.seed,
                           shuffle=args.sampler_shuffle)
    else:
        dataset = MixtureDataset(samples, features=features[0], tag_entries=distinct, fps=_common_fps(datasets))
        order = MixtureSchedule(sizes=sizes, episode_ranges=[_ranges(d) for d in datasets],
                                weights=[e.weight for e in mixture.entries], weighting=mixture.weighting,
                                seed=args.seed if mixture.seed is None else mixture.seed,
                                samples_per_epoch=mixture.samples_per_epoch,
                                global_batch=args.per_device_batch_size * world_size, shuffle=args.sampler_shuffle,
                                streaming=args.streaming)
    return MixtureData(dataset=dataset, order=order, transforms=transforms, embodiments=embodiments,
                       default_embodiment=default, labels=labels, mixture=mixture)


def _check_drawn(config: RunConfig) -> None:
    """Settings of the weighted schedule that a model-drawn mixture does not read are errors, not ignored."""
    mixture, args = config.data_mixture, config.training
    assert mixture is not None
    problems = []
    if args.streaming:
        problems.append("--streaming reads episodes block by block, but this model's data section draws each "
                        "sample at random (e.g. DreamZero's data.use_mixture_dataset); drop one of the two")
    if mixture.samples_per_epoch is not None or mixture.weighting != "dataset":
        problems.append("data_mixture.weighting / samples_per_epoch belong to the weighted schedule; this model's "
                        "data section draws the samples with its own rules (DreamZero: data.balance_dataset_weights, "
                        "data.balance_trajectory_weights): remove them")
    if problems:
        raise ConfigError(problems)


def _ranges(dataset: Any) -> list[tuple[int, int]]:
    ranges = dataset.episode_ranges() if hasattr(dataset, "episode_ranges") else None
    return [(int(a), int(b)) for a, b in ranges] if ranges else [(0, len(dataset))]
