"""Spec of the ``embodied data`` command (entry point group ``embodied.commands``; imports no torch)."""

from __future__ import annotations

from embodied_core.registry import PluginSpec

__all__ = ["DATA_COMMAND"]

DATA_COMMAND = PluginSpec(
    name="data",
    description="dataset tools: inspect a LeRobot dataset, synthesize one, print its stats, preview augmentation",
    factory="embodied_data.cli:main",
)
