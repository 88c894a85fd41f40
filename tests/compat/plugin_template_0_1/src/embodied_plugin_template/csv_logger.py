"""``csv_metrics``: metrics as ``step,metric,value`` rows in a CSV file of the output directory.

A logger with its own config fields: it stays off until ``plugins.csv_metrics.filename=metrics.csv`` (or
``--plugins.csv-metrics.filename metrics.csv``) names the file.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from embodied_core import TrainingArgs
from embodied_core.loggers import MetricsLogger

__all__ = ["CsvMetricsLogger", "CsvMetricsOptions", "build_csv_metrics"]


def _file_name(instance: object, attribute: attrs.Attribute, value: str | None) -> None:
    if value is not None and (not value or Path(value).name != value):
        raise ValueError(f"must be a plain file name inside the output directory, without folders (got {value!r})")


@attrs.define(kw_only=True)
class CsvMetricsOptions:
    """Options of the ``csv_metrics`` logger."""

    filename: str | None = attrs.field(default=None, validator=_file_name)
    """CSV file written in --output-dir (rank 0); None keeps the logger off."""
    metrics: list[str] = attrs.field(factory=list)
    """Metric names to write (e.g. loss,lr); empty writes every logged metric."""


class CsvMetricsLogger(MetricsLogger):
    """Appends one ``step,metric,value`` row per logged metric; a resumed run drops rows after its step."""

    def __init__(self, path: Path, *, metrics: list[str], resume_step: int | None) -> None:
        self.metrics = set(metrics)
        kept: list[list[str]] = []
        if resume_step is not None and path.is_file():
            with path.open(newline="") as f:
                kept = [row for row in list(csv.reader(f))[1:] if int(row[0]) <= resume_step]
        self._file = path.open("w", newline="")
        self._writer = csv.writer(self._file)
        self._writer.writerows([["step", "metric", "value"], *kept])

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            if not self.metrics or key in self.metrics:
                self._writer.writerow([step, key, repr(float(value))])
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def build_csv_metrics(args: TrainingArgs, *, output_dir: Path, is_main: bool, resume_step: int | None = None,
                      options: CsvMetricsOptions, **_: Any) -> MetricsLogger | None:
    """Factory named by the spec (rank 0, when ``filename`` is set)."""
    if not is_main or options.filename is None:
        return None
    return CsvMetricsLogger(output_dir / options.filename, metrics=options.metrics, resume_step=resume_step)
