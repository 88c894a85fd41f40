"""Atomic pieces of checkpoint writing: ``latest`` repointing and cleanup of interrupted saves."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from embodied_core.checkpoint.layout import LATEST

__all__ = ["point_latest_to", "remove_stale_temporaries"]

_TMP_PREFIX = ".tmp-"


def fsync_dir(path: Path) -> None:
    """Flushes a directory entry (a rename) to disk where the OS supports it."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_stale_temporaries(root: Path) -> None:
    """Deletes temporary directories left by saves that were interrupted (crash, kill -9)."""
    if root.is_dir():
        for child in root.iterdir():
            if child.name.startswith(_TMP_PREFIX):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)


def point_latest_to(target: Path) -> None:
    """Atomically repoints ``<root>/latest`` (a relative symlink) to ``target``."""
    link = target.parent / LATEST
    tmp = target.parent / f"{_TMP_PREFIX}{LATEST}-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(target.name, target_is_directory=True)
    os.replace(tmp, link)
    fsync_dir(target.parent)
