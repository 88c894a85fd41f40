"""Atomic pieces of checkpoint writing: commit, replace, prune, ``latest``, and cleanup of interrupted work.

Every directory operation that could be interrupted halfway happens under a temporary name (``.tmp-*``),
which :func:`~embodied_core.checkpoint.layout.list_checkpoints` never returns and
:func:`remove_stale_temporaries` deletes at the next start. So a ``step_<N>`` directory is complete by
construction, also when a process is killed inside ``rmtree``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from embodied_core.checkpoint.layout import LATEST, META_FILE

__all__ = ["TMP_PREFIX", "commit_checkpoint", "discard_directory", "fsync_dir", "fsync_tree", "point_latest_to",
           "remove_stale_temporaries"]

TMP_PREFIX = ".tmp-"
"""Prefix of every temporary name under ``checkpoints/`` (saves in progress, directories being removed)."""


def fsync_dir(path: Path) -> None:
    """Flushes a directory entry (a rename) to disk where the OS supports it."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def fsync_tree(directory: Path) -> None:
    """Flushes every file under ``directory`` to disk."""
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                os.fsync(f.fileno())


def remove_stale_temporaries(root: Path) -> None:
    """Deletes what interrupted saves and removals left under ``root`` (crash, kill -9)."""
    if root.is_dir():
        for child in root.iterdir():
            if child.name.startswith(TMP_PREFIX):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)


def discard_directory(path: Path) -> None:
    """Removes a checkpoint directory atomically: renamed to a temporary name first, then deleted.

    A kill during the deletion leaves only a ``.tmp-*`` directory (cleaned at the next start), never a
    ``step_<N>`` that lost some of its files.
    """
    if not path.exists():
        return
    doomed = path.parent / f"{TMP_PREFIX}removed-{path.name}-{os.getpid()}"
    if doomed.exists():
        shutil.rmtree(doomed, ignore_errors=True)
    os.replace(path, doomed)
    fsync_dir(path.parent)
    shutil.rmtree(doomed, ignore_errors=True)


def point_latest_to(target: Path) -> None:
    """Atomically repoints ``<root>/latest`` (a relative symlink) to ``target``."""
    link = target.parent / LATEST
    tmp = target.parent / f"{TMP_PREFIX}{LATEST}-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(target.name, target_is_directory=True)
    os.replace(tmp, link)
    fsync_dir(target.parent)


def commit_checkpoint(tmp: Path, final: Path, meta: dict[str, Any], *,
                      write_extras: Callable[[Path], None] | None = None) -> None:
    """Rank 0's last steps of a save: extras, ``meta.json``, flush, rename into place, ``latest``.

    An existing ``final`` (a checkpoint of the same step from an earlier attempt) is discarded atomically
    before the rename.
    """
    if write_extras is not None:
        write_extras(tmp)
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
    fsync_tree(tmp)
    if final.exists():
        discard_directory(final)
    tmp.rename(final)
    fsync_dir(final.parent)
    point_latest_to(final)
