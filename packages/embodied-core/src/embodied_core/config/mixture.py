"""Dataset mixtures: the ``data_mixture:`` section of a run, also read from ``--dataset-mixture FILE.yaml``.

A mixture is a list of entries, each a dataset (``path``, or a glob of paths) with a sampling ``weight`` and,
optionally, its own data flags (``split`` / ``episodes``, ``dataset_format``, ``dataset_strategy``, ``robot_type``,
``lerobotdataset_version``, ``video_backend``), an ``embodiment`` tag and ``data:`` overrides of the model's data
section (keys, cameras, dims) for that entry. Fields an entry leaves unset take the run's flags; ``--dataset-path``
is the one-entry case. Example::

    data_mixture:
      weighting: dataset          # dataset | frames | trajectory
      stats: per_entry            # per_entry | merged
      entries:
        - path: /data/libero_v30
          weight: 3
          embodiment: libero
        - path: /data/aloha_*     # a glob: one entry per match, each with this weight
          weight: 1
          split: "0-49"
          data: {state_key: observation.qpos}

The file of ``--dataset-mixture`` holds the section's content (or a document with one ``data_mixture:`` key); it
replaces a ``data_mixture:`` section of the YAML. Relative entry paths are resolved against ``--data-root-dir``
when it is set, else against the folder of the file that holds them. :func:`with_mixture` loads the file, expands
the globs and makes every path absolute, so the ``config.yaml`` a run writes lists the concrete datasets.

This module imports no torch and reads no dataset.
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from embodied_core.config.converter import structure
from embodied_core.errors import ConfigError, UsageError

__all__ = ["MIXTURE_SECTION", "DataMixture", "MixtureEntry", "StatsMode", "Weighting", "entry_label",
           "expand_mixture", "load_mixture_file", "one_entry_mixture", "read_mixture_file", "structure_mixture",
           "with_mixture"]

MIXTURE_SECTION = "data_mixture"
"""Top-level key of the mixture section in a config YAML (and optionally in a ``--dataset-mixture`` file)."""

Weighting = Literal["dataset", "frames", "trajectory"]
StatsMode = Literal["per_entry", "merged"]
_GLOB_CHARS = frozenset("*?[")


@attrs.define(kw_only=True)
class MixtureEntry:
    """One dataset of a mixture. Unset fields take the run's own flags."""

    path: str
    """Dataset root (LeRobot: the folder holding meta/info.json; HDF5: the file), or a glob matching several
    (each match becomes an entry with this entry's settings and weight)."""
    weight: float = 1.0
    """Sampling weight (> 0); what it multiplies depends on the mixture's ``weighting``."""
    name: str | None = None
    """Label of the entry in reports and logs (default: the folder name)."""
    episodes: str | list[int] | None = None
    """Episodes to read, as a list or ``"0-9,12"`` (exclusive with ``split``)."""
    split: str | None = None
    """Split to read (default: the run's --split)."""
    dataset_format: str | None = None
    """Reader of this entry (default: the run's --dataset-format)."""
    dataset_strategy: str | None = None
    """LeRobot build strategy of this entry (default: the run's --dataset-strategy)."""
    robot_type: str | None = None
    """Embodiment layout of the state/action dimensions (default: the run's --robot-type)."""
    lerobotdataset_version: Literal["v2.0", "v2.1", "v3.0"] | None = None
    """On-disk LeRobot version expected (default: the run's --lerobotdataset-version)."""
    video_backend: str | None = None
    """Video decoder of this entry (default: the run's --video-backend)."""
    embodiment: str | None = None
    """Embodiment tag: entries with one tag share normalization statistics and one inference interface in the
    policy folder (``predict_action(obs, embodiment=TAG)``); default: the entry's own name."""
    data: dict[str, Any] = attrs.field(factory=dict)
    """Overrides of the model's data section for this entry (e.g. ``state_key``, ``camera_keys``); the dataset's
    own widths, names and cameras are filled in for the fields left unset."""

    def split_flag(self, default: str) -> str:
        """The ``--split`` value this entry reads: its episodes, its split, else ``default``."""
        if self.episodes is not None:
            if isinstance(self.episodes, str):
                return self.episodes
            return ",".join(str(int(e)) for e in self.episodes)
        return self.split if self.split is not None else default


@attrs.define(kw_only=True)
class DataMixture:
    """The ``data_mixture:`` section.

    Sampling (``weighting``), with ``w_e`` the weights, ``n_e`` an entry's samples and ``t_e`` its episodes:
    ``dataset``: entry e gets the share ``w_e / sum(w)`` of every epoch's draws; ``frames``: ``w_e n_e / sum(w n)``
    (equal weights read every frame once per epoch); ``trajectory``: ``w_e t_e / sum(w t)``, and within an entry
    every episode gets an equal share of its draws whatever its length. The schedule itself is documented in
    :mod:`embodied_core.data.mixture.schedule`.
    """

    entries: list[MixtureEntry]
    """The datasets, in order (entry indices in messages count from 0)."""
    weighting: Weighting = "dataset"
    """What a weight multiplies: dataset (the weights are the shares), frames, trajectory (see the class doc)."""
    stats: StatsMode = "per_entry"
    """Normalization statistics: per_entry (each embodiment tag its own, the GR00T / X-VLA convention) or merged
    (one set over the union of all entries, weighted by frame counts)."""
    samples_per_epoch: int | None = None
    """Draws per epoch (default: the entries' total number of samples); rounded down to whole global batches."""
    seed: int | None = None
    """Seed of the sampling schedule (default: --seed)."""
    source: str | None = None
    """The file the section was read from (set when it is loaded; informational)."""


def entry_label(index: int, entry: MixtureEntry) -> str:
    """How messages name an entry: ``data_mixture.entries[1] (/data/aloha)``."""
    return f"{MIXTURE_SECTION}.entries[{index}] ({entry.path})"


def read_mixture_file(path: str | Path) -> dict[str, Any]:
    """The raw section in a ``--dataset-mixture`` file (its content, or the value of its ``data_mixture:`` key)."""
    from embodied_core.documents import load_yaml_text, read_text_bounded

    file = Path(path).expanduser()
    if not file.is_file():
        raise UsageError(f"--dataset-mixture {path}: no such file")
    try:
        text = read_text_bounded(file, error=ConfigError)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"cannot read it ({type(exc).__name__}: {exc})"], source=str(file)) from None
    # size, depth and alias expansion bounded, as every config YAML: a mixture file may come from someone else
    doc = load_yaml_text(text, source=str(file), error=ConfigError)
    if isinstance(doc, Mapping) and set(doc) == {MIXTURE_SECTION}:
        doc = doc[MIXTURE_SECTION]
    if not isinstance(doc, Mapping):
        raise ConfigError([f"expected a mapping with an 'entries:' list, got {type(doc).__name__}"], source=str(file))
    return dict(doc)


def load_mixture_file(path: str | Path) -> DataMixture:
    """The mixture a ``--dataset-mixture`` file holds, strictly structured, with its ``source`` set (globs not yet
    expanded: :func:`expand_mixture`)."""
    file = Path(path).expanduser()
    mixture = structure_mixture(read_mixture_file(file), source=str(file))
    return attrs.evolve(mixture, source=str(file.absolute()))


def _entry_problems(index: int, entry: MixtureEntry) -> list[str]:
    label = entry_label(index, entry)
    problems = []
    if not (math.isfinite(entry.weight) and entry.weight > 0):
        problems.append(f"{label}: weight must be a finite number > 0 (got {entry.weight!r}); leave the entry out "
                        "to give it no draws")
    if entry.episodes is not None and entry.split is not None:
        problems.append(f"{label}: episodes and split exclude each other (episodes {entry.episodes!r} already "
                        f"choose what to read; drop split {entry.split!r})")
    if not str(entry.path).strip():
        problems.append(f"{label}: path is empty")
    return problems


def structure_mixture(raw: Mapping[str, Any] | None, *, source: str) -> DataMixture:
    """Strictly structures the section (unknown keys, wrong types) and checks each entry's values; one ConfigError
    listing every problem, each naming the entry."""
    try:
        mixture = structure(raw, DataMixture, path=MIXTURE_SECTION, source=source)
    except ConfigError as exc:  # still check the entries that do structure, so one run reports everything
        raw_entries = (raw or {}).get("entries") if isinstance(raw, Mapping) else None
        if not isinstance(raw_entries, list):
            raise
        # the converter names a list item's problems without its index: structure each entry on its own instead
        problems = [p for p in exc.problems if not p.startswith(f"{MIXTURE_SECTION}.entries")]
        for index, item in enumerate(raw_entries):
            try:
                entry = structure(item, MixtureEntry, path=f"{MIXTURE_SECTION}.entries[{index}]")
            except ConfigError as entry_exc:
                problems.extend(entry_exc.problems)
                continue
            problems.extend(_entry_problems(index, entry))
        raise ConfigError(problems, source=source) from None
    problems = [p for i, entry in enumerate(mixture.entries) for p in _entry_problems(i, entry)]
    if not mixture.entries:
        problems.append(f"{MIXTURE_SECTION}.entries: empty; list at least one dataset")
    if mixture.samples_per_epoch is not None and mixture.samples_per_epoch < 1:
        problems.append(f"{MIXTURE_SECTION}.samples_per_epoch: must be >= 1 (got {mixture.samples_per_epoch})")
    names = [e.name for e in mixture.entries if e.name is not None]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(f"{MIXTURE_SECTION}.entries: the names {duplicates} are used twice; names label entries "
                        "in reports and must be unique (embodiment tags may repeat)")
    if problems:
        raise ConfigError(problems, source=source)
    return mixture


def _expanded(index: int, entry: MixtureEntry, base: Path) -> tuple[list[MixtureEntry], str | None]:
    """The entry with an absolute path, or one entry per glob match; ``(entries, problem)``."""
    raw = Path(entry.path).expanduser()
    path = raw if raw.is_absolute() else base / raw
    if path.exists() or not _GLOB_CHARS & set(str(entry.path)):  # an existing path is never a pattern
        if not path.exists():
            return [], (f"{entry_label(index, entry)}: path {path} does not exist (relative paths are resolved "
                        f"against {base})")
        return [attrs.evolve(entry, path=os.path.abspath(path))], None  # abspath: also folds ../ segments
    matches = sorted(glob.glob(str(path)))
    if not matches:
        return [], f"{entry_label(index, entry)}: the glob {path} matches nothing"
    stem = entry.name
    return [attrs.evolve(entry, path=os.path.abspath(m),
                         name=f"{stem}[{Path(m).name}]" if stem is not None else None) for m in matches], None


def with_mixture(config: Any) -> Any:
    """``config`` (a RunConfig) with the ``--dataset-mixture`` file loaded into its ``data_mixture`` section (the
    flag is then cleared: the section is the record), every glob expanded and every path absolute (idempotent).

    Raises:
        ConfigError: a malformed file, a bad entry, a path that does not exist, a glob that matches nothing, or a
            mixture together with --dataset-path; every problem together.
    """
    args = config.training
    mixture = config.data_mixture
    if args.dataset_mixture is not None:
        mixture = load_mixture_file(args.dataset_mixture)
        config = attrs.evolve(config, training=attrs.evolve(args, dataset_mixture=None))
    if mixture is None:
        return config
    if config.training.dataset_path:
        raise ConfigError([f"--dataset-path {config.training.dataset_path} and a dataset mixture "
                           f"({mixture.source or MIXTURE_SECTION + ':'}) exclude each other; add the dataset as an "
                           "entry of the mixture, or drop the mixture"])
    return attrs.evolve(config, data_mixture=expand_mixture(mixture, data_root_dir=args.data_root_dir))


def one_entry_mixture(config: Any) -> Any:
    """``config`` with its ``--dataset-path`` as a mixture of one entry (weight 1, the run's own data flags): how a
    model that draws its own mixture (``mixture_draw()``, DreamZero's ``data.use_mixture_dataset``) reads one
    dataset, as LoongForge wraps it."""
    path = config.training.dataset_path
    mixture = DataMixture(entries=[MixtureEntry(path=str(path))])
    return attrs.evolve(config, training=attrs.evolve(config.training, dataset_path=None), data_mixture=mixture)


def expand_mixture(mixture: DataMixture, *, data_root_dir: str | None = None) -> DataMixture:
    """``mixture`` with every glob expanded and every entry path absolute: relative paths under ``data_root_dir``,
    else under the folder of ``mixture.source``, else the working directory (idempotent).

    Raises:
        ConfigError: paths that do not exist and globs that match nothing, each naming its entry.
    """
    if data_root_dir is not None:
        base = Path(data_root_dir).expanduser()
    elif mixture.source is not None:
        base = Path(mixture.source).parent
    else:
        base = Path.cwd()
    entries: list[MixtureEntry] = []
    problems: list[str] = []
    for index, entry in enumerate(mixture.entries):
        expanded, problem = _expanded(index, entry, base)
        entries.extend(expanded)
        if problem:
            problems.append(problem)
    if problems:
        raise ConfigError(problems, source=mixture.source or MIXTURE_SECTION)
    return attrs.evolve(mixture, entries=entries)
