"""The metrics-logger contract."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MetricsLogger"]


class MetricsLogger:
    """Receives the resolved config once, then one metrics dict per logging step."""

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Called once at start with the resolved configuration (plain data)."""

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """Called on logging steps with Python floats (already reduced over ranks)."""

    def log_summary(self, summary: Mapping[str, Any]) -> None:
        """Called once at the end of training."""

    def close(self) -> None:
        """Flushes and releases resources."""
