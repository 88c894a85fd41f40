"""Metric sinks (group ``embodied.loggers``).

A logger factory is ``build(args, *, output_dir, is_main) -> MetricsLogger | None``; it returns None when
its flags leave it disabled (e.g. W&B with ``--wandb-mode disabled``). Every installed logger is asked.
"""
