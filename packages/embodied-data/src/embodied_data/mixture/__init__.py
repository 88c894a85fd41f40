"""Dataset-mixture tools of embodied-data: ``embodied data mixture FILE.yaml`` (:mod:`.report`).

The mixture itself (file format, schedule, statistics, per-entry transforms) lives in embodied-core
(:mod:`embodied_core.config.mixture`, :mod:`embodied_core.data.mixture`): the trainer builds it, and core depends on
no other package of ours. This package checks a mixture file against the datasets (and a model) before a run.
"""

from embodied_data.mixture.report import MixtureReport, mixture_report, render_mixture_report, report_json

__all__ = ["MixtureReport", "mixture_report", "render_mixture_report", "report_json"]
