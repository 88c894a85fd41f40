"""Metric sinks (group ``embodied.loggers``).

A logger factory is ``build(args, *, output_dir, is_main, resume_step, **_) -> MetricsLogger | None`` (plus
``options=`` when its spec declares an ``options`` class); it returns None when its flags leave it disabled
(e.g. W&B with ``--wandb-mode disabled``). Every installed logger is asked unless ``--loggers`` narrows the
selection or ``--block-plugins`` names it. Subclass :class:`MetricsLogger` for a new sink.
"""

from embodied_core.loggers.base import MetricsLogger

__all__ = ["MetricsLogger"]
