"""``embodied data mixture FILE.yaml``: what a dataset mixture resolves to, checked before GPU hours are spent.

The report lists every entry as training will read it (the concrete path after globs, format and LeRobot version,
episodes, samples, embodiment, features), the sampling share of each entry **measured over one epoch of the real
schedule** next to the share its weight requests, the statistics mode with the embodiments it produces, and every
problem. With ``--model-name`` (and ``--config-file``) the entries are also mapped into that model's input exactly
as ``embodied train`` does: each entry's data section is resolved, the model's own data checks run on it, its
transform runs on one sample and the samples of all entries are collated together; without a model, entries whose
features differ (cameras, widths) are listed as notes.

Everything goes through the training code itself (``embodied_core.config.mixture*``, ``embodied_core.data.mixture``)
so the report cannot disagree with a run. Exit code: 0 without problems, 1 with problems, 2 for a malformed file.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from embodied_core.config.mixture import DataMixture, entry_label
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError, EmbodiedError

__all__ = ["MixtureReport", "mixture_report", "render_mixture_report", "report_json"]


@attrs.define(kw_only=True)
class MixtureReport:
    """What :func:`mixture_report` found.

    Attributes:
        source: the mixture file.
        mixture: the section, globs expanded (None when the file itself is malformed: see ``problems``).
        model: the model the entries were mapped into (None: data only).
        entries: per entry: label, path, name, format, version, episodes, samples, embodiment, weight, requested
            and measured share, passes (draws / samples), features.
        epoch_length, epoch: draws per epoch, and the epoch measured.
        embodiments: embodiment tag -> entry indices (with the statistics mode).
        problems: everything that stops training; notes: what training tolerates but a user should see.
    """

    source: str
    mixture: DataMixture | None
    model: str | None
    entries: list[dict[str, Any]] = attrs.field(factory=list)
    epoch_length: int | None = None
    epoch: int = 0
    embodiments: dict[str, list[int]] = attrs.field(factory=dict)
    problems: list[str] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)

    @property
    def ok(self) -> bool:
        """No problems."""
        return not self.problems


def _features_text(features: Mapping[str, Any]) -> str:
    parts = []
    for key, feature in features.items():
        if key in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
            continue
        shape = tuple(feature.shape)
        if feature.is_visual:
            parts.append(f"{key} {'x'.join(str(s) for s in shape[:2])}")
        else:
            parts.append(f"{key} [{shape[-1] if shape else 1}]")
    return ", ".join(parts)


def _feature_notes(entries: Sequence[dict[str, Any]]) -> list[str]:
    """Where the entries' features differ (a model must map each into its input)."""
    notes = []
    first = entries[0]
    for entry in entries[1:]:
        a, b = first["features"], entry["features"]
        cams_a = [k for k, f in a.items() if f.is_visual]
        cams_b = [k for k, f in b.items() if f.is_visual]
        if cams_a != cams_b:
            notes.append(f"{entry['label']}: cameras {cams_b}, {first['label']} has {cams_a}")
        for key in sorted(set(a) & set(b)):
            if not a[key].is_visual and tuple(a[key].shape) != tuple(b[key].shape):
                notes.append(f"{entry['label']}: {key!r} has shape {tuple(b[key].shape)}, {first['label']} "
                             f"{tuple(a[key].shape)}")
    return notes


def _data_only(source: Path, flags: Mapping[str, Any]) -> tuple[DataMixture, TrainingArgs, list[Any], list[str]]:
    """Without a model: the mixture, the flags, each entry's dataset (its format, a neutral data section), problems."""
    from embodied_core import registry
    from embodied_core.config.mixture import expand_mixture, load_mixture_file
    from embodied_core.config.mixture_resolve import entry_args
    from embodied_core.config.model_config import BaseDataConfig
    from embodied_core.data.dataset import build_training_dataset
    from embodied_core.registry import groups
    from embodied_core.registry.specs import DatasetFormatSpec

    args = TrainingArgs(**flags)
    mixture = expand_mixture(load_mixture_file(source), data_root_dir=args.data_root_dir)
    datasets, problems = [], []
    for index, entry in enumerate(mixture.entries):
        label = entry_label(index, entry)
        entry_flags = entry_args(args, entry)
        try:
            spec = registry.get_spec(groups.DATASET_FORMATS, entry_flags.dataset_format, flag="dataset_format")
            found = spec.run_preflight(entry_flags, BaseDataConfig()) if isinstance(spec, DatasetFormatSpec) else []
            problems.extend(f"{label}: {p}" for p in found)
            datasets.append(None if found else build_training_dataset(entry_flags, BaseDataConfig()))
        except EmbodiedError as exc:
            problems.append(f"{label}: {exc}")
            datasets.append(None)
    return mixture, args, datasets, problems


def _with_model(source: Path, model: str, config_file: str | None, flags: Mapping[str, Any],
                overrides: Sequence[str]) -> tuple[Any, Any, list[str]]:
    """With a model: the run's resolved config, its built mixture (None when a problem stops it), problems (the run's
    validation, the entries' metadata, then mapping each entry into the model's input)."""
    from embodied_core.config.mixture_check import mixture_preflight
    from embodied_core.config.resolve import load_config, model_spec
    from embodied_core.data.mixture import build_mixture
    from embodied_core.validation import run_config_problems

    config = load_config(model, config_file=config_file, overrides=overrides,
                         training={"dataset_mixture": str(source), **flags})
    problems, _ = run_config_problems(config, world_size=1)
    if not problems:
        problems = mixture_preflight(config)
    if problems:
        return config, None, problems
    try:
        return config, build_mixture(config, model_spec(model)), []
    except ConfigError as exc:
        return config, None, list(exc.problems)
    except EmbodiedError as exc:
        return config, None, [str(exc)]


def _entry_datasets(config: Any) -> list[Any]:
    """Each entry's dataset as the run builds it (None where it cannot be built, or when the configuration itself
    has problems), for the table and the measured shares when the mapping into the model failed."""
    from embodied_core.config.mixture_resolve import entry_run_configs
    from embodied_core.data.dataset import build_training_dataset

    try:
        configs = entry_run_configs(config)
    except ConfigError:
        return [None] * len(config.data_mixture.entries)
    out = []
    for entry_config in configs:
        try:
            out.append(build_training_dataset(entry_config.training, entry_config.data))
        except EmbodiedError:
            out.append(None)
    return out


def _entry_rows(mixture: DataMixture, datasets: Sequence[Any], tags: Sequence[str]) -> list[dict[str, Any]]:
    from embodied_core.data.dataset import resolve_features

    rows = []
    for index, (entry, dataset) in enumerate(zip(mixture.entries, datasets, strict=True)):
        meta = getattr(dataset, "meta", None)
        rows.append({
            "label": entry_label(index, entry), "path": entry.path, "name": entry.name or Path(entry.path).name,
            "format": entry.dataset_format, "version": getattr(meta, "version", None),
            "episodes": len(dataset.episode_ranges()) if dataset is not None and hasattr(dataset, "episode_ranges")
            else None,
            "samples": len(dataset) if dataset is not None else None, "embodiment": tags[index],
            "weight": entry.weight,
            "features": resolve_features(dataset, format_name=str(entry.dataset_format)) if dataset is not None else {},
        })
    return rows


def _measure(rows: list[dict[str, Any]], order: Any, epoch: int) -> None:
    draws = np.asarray(order(epoch), dtype=np.int64)
    counts = Counter(order.entry_of(draws).tolist())
    for index, (row, share) in enumerate(zip(rows, order.shares(), strict=True)):
        row["requested"] = share
        row["draws"] = counts.get(index, 0)
        row["measured"] = counts.get(index, 0) / len(draws)
        row["passes"] = counts.get(index, 0) / order.sizes[index]


def mixture_report(path: str | Path, *, model: str | None = None, config_file: str | None = None,
                   flags: Mapping[str, Any] | None = None, epoch: int = 0,
                   overrides: Sequence[str] = ()) -> MixtureReport:
    """Resolves, builds and measures the mixture in ``path`` (see the module docstring).

    Args:
        path: the mixture file (the ``data_mixture:`` section's content, or a document with that one key).
        model: a model plugin to map the entries into (its data section from its default YAML or ``config_file``).
        flags: training flags the entries inherit (``dataset_format``, ``video_backend``, ``seed``, ...).
        overrides: dotlist items of the model's sections (``model.max_state_dim=64``), with ``model``.
        epoch: the epoch whose draws are measured.

    Raises:
        UsageError / ConfigError: the file is missing or malformed (strict structure, unknown keys, bad weights,
            paths that do not exist).
    """
    from embodied_core.data.mixture import MixtureSchedule, embodiment_tags

    source = Path(path).expanduser()
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    built = None
    if model is not None:
        config, built, problems = _with_model(source, model, config_file, flags, overrides)
        mixture, args = config.data_mixture, config.training
        datasets = ([d.dataset for d in built.dataset.datasets] if built is not None
                    else _entry_datasets(config))
    else:
        mixture, args, datasets, problems = _data_only(source, flags)
    mixture = attrs.evolve(mixture, entries=[attrs.evolve(e, dataset_format=e.dataset_format or args.dataset_format)
                                             for e in mixture.entries])
    tags = embodiment_tags(mixture)
    report = MixtureReport(source=str(source), mixture=mixture, model=model, problems=list(problems), epoch=epoch)
    report.entries = _entry_rows(mixture, datasets, tags)
    report.embodiments = {tag: [i for i, t in enumerate(tags) if t == tag] for tag in dict.fromkeys(tags)}
    order = built.order if built is not None else None
    if order is None and all(d is not None for d in datasets):
        try:
            order = MixtureSchedule(sizes=[len(d) for d in datasets], episode_ranges=[
                d.episode_ranges() if hasattr(d, "episode_ranges") else [(0, len(d))] for d in datasets],
                weights=[e.weight for e in mixture.entries], weighting=mixture.weighting,
                seed=args.seed if mixture.seed is None else mixture.seed,
                samples_per_epoch=mixture.samples_per_epoch, global_batch=args.per_device_batch_size,
                shuffle=args.sampler_shuffle, streaming=args.streaming)
        except ValueError as exc:
            report.problems.append(f"data_mixture: {exc}")
    if order is not None:
        report.epoch_length = len(order)
        _measure(report.entries, order, epoch)
    if model is None and all(d is not None for d in datasets):
        report.notes.extend(_feature_notes(report.entries))
        if report.notes:
            report.notes.append("the entries differ: check how each maps into a model's input with --model-name")
    return report


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def render_mixture_report(report: MixtureReport) -> str:
    """The report as text (what ``embodied data mixture`` prints)."""
    mixture = report.mixture
    assert mixture is not None
    lines = [f"mixture {report.source}: {len(report.entries)} entries, weighting {mixture.weighting}, stats "
             f"{mixture.stats}, " + (f"{report.epoch_length} draws per epoch (measured: epoch {report.epoch})"
                                      if report.epoch_length is not None else "schedule not built (see problems)")]
    header = f"  {'#':>2}  {'entry':<28} {'format':<22} {'episodes':>8} {'samples':>8}  {'embodiment':<14} " \
             f"{'weight':>7} {'requested':>9} {'measured':>9} {'passes':>7}"
    lines.append(header)
    for index, row in enumerate(report.entries):
        fmt = f"{row['format']}" + (f" {row['version']}" if row.get("version") else "")
        passes = f"{row['passes']:.2f}" if "passes" in row else "-"
        lines.append(f"  {index:>2}  {row['name'][:28]:<28} {fmt[:22]:<22} {row['episodes'] or '-':>8} "
                     f"{row['samples'] or '-':>8}  {row['embodiment'][:14]:<14} {row['weight']:>7g} "
                     f"{_percent(row.get('requested')):>9} {_percent(row.get('measured')):>9} {passes:>7}")
    lines.append("paths and features:")
    for index, row in enumerate(report.entries):
        lines.append(f"  {index:>2}  {row['path']}")
        if row["features"]:
            lines.append(f"      {_features_text(row['features'])}")
    groups = "; ".join(f"{tag}: entries {', '.join(map(str, members))}" for tag, members in report.embodiments.items())
    lines.append(f"stats {mixture.stats}: " + (f"one set over all entries, used by every embodiment ({groups})"
                                               if mixture.stats == "merged" else f"per embodiment ({groups})"))
    if report.model is not None:
        lines.append(f"model {report.model}: " + ("every entry maps into its input (each entry's transform ran on a "
                                                  "sample, all entries collate together)" if report.ok else
                                                  "see problems"))
    for title, items in (("notes", report.notes), ("problems", report.problems)):
        if items:
            lines.append(f"{title}:")
            lines.extend(f"  - {item}" for item in items)
    lines.append("ok: no problems" if report.ok else f"{len(report.problems)} problem(s)")
    return "\n".join(lines)


def report_json(report: MixtureReport) -> dict[str, Any]:
    """The report as plain data (``--json``)."""
    entries = []
    for row in report.entries:
        features = {k: {"dtype": f.dtype, "shape": list(f.shape)} for k, f in row["features"].items()}
        entries.append({**{k: v for k, v in row.items() if k != "features"}, "features": features})
    mixture = report.mixture
    return {"source": report.source, "ok": report.ok, "model": report.model,
            "weighting": mixture.weighting if mixture else None, "stats": mixture.stats if mixture else None,
            "epoch_length": report.epoch_length, "epoch": report.epoch, "entries": entries,
            "embodiments": report.embodiments, "problems": report.problems, "notes": report.notes}

