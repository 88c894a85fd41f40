"""Lifecycle hooks that inject a disk fault at a chosen point of a real training run (in process or, through
``EMBODIED_PLUGINS``, in an ``embodied train`` subprocess configured by environment variables)."""

from __future__ import annotations

import os
from pathlib import Path

from embodied_core import hookimpl
from tests.reliability.mounts import fill, trigger_read_only


class FillDiskAtStep:
    """At the end of ``step`` (after every hook of the save before it), fills the output filesystem, leaving
    ``leave_bytes`` free."""

    def __init__(self, step: int, directory: Path, leave_bytes: int) -> None:
        self.step, self.directory, self.leave_bytes = step, Path(directory), leave_bytes
        self.filler: Path | None = None

    @hookimpl
    def on_step_end(self, step: int, metrics: dict[str, float] | None) -> None:
        if step == self.step:
            self.filler = fill(self.directory, leave_bytes=self.leave_bytes)


class ReadOnlyAtStep:
    """At the end of ``step``, the ext4 filesystem on ``device`` goes read-only (as on a disk error)."""

    def __init__(self, step: int, device: str) -> None:
        self.step, self.device = step, device

    @hookimpl
    def on_step_end(self, step: int, metrics: dict[str, float] | None) -> None:
        if step == self.step:
            trigger_read_only(self.device)


class _FillFromEnvironment:
    """:class:`FillDiskAtStep` configured by H28_FILL_STEP, H28_FILL_DIR and H28_FILL_LEAVE (read when called)."""

    @hookimpl
    def on_step_end(self, step: int, metrics: dict[str, float] | None) -> None:
        if step == int(os.environ["H28_FILL_STEP"]):
            fill(Path(os.environ["H28_FILL_DIR"]), leave_bytes=int(os.environ.get("H28_FILL_LEAVE", "0")))


ENV_FILL = _FillFromEnvironment()
"""For ``EMBODIED_PLUGINS=embodied.hooks:h28_fill=tests.reliability.fault_hooks:ENV_FILL``."""
