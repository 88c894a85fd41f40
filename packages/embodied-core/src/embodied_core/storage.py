"""Full disks and read-only directories while we write: what failed, where, and how much space it needed.

Writers (checkpoints, policy exports, precomputed caches) write under a temporary name and rename when complete,
so a failed write never replaces a good file. :func:`guard_write` turns the failure itself - ``ENOSPC``/``EDQUOT``
(no space, quota), ``EROFS`` (the filesystem went read-only), ``EACCES``/``EPERM``, ``EFBIG`` - into a
:class:`StorageError` naming the path, the bytes the write needed and the bytes free there, after removing the
partial temporary. Libraries do not always keep the errno (``torch.save`` reports "file write failed",
safetensors an ``IoError`` text), so a failure without one is classified by looking at the filesystem itself:
read-only flag, free space against what the write needed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from embodied_core.errors import EmbodiedError

__all__ = ["StorageError", "format_bytes", "free_bytes", "guard_write", "storage_reason"]

_ERRNOS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
           errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
           errno.EPERM: "operation not permitted", errno.EFBIG: "file too large for this file system or limit"}
_TEXTS = {"no space left on device": errno.ENOSPC, "os error 28": errno.ENOSPC, "storagefull": errno.ENOSPC,
          "disk quota exceeded": errno.EDQUOT, "read-only file system": errno.EROFS, "os error 30": errno.EROFS,
          "readonlyfilesystem": errno.EROFS}
"""How the errno survives in messages that lost it (safetensors: "I/O error: No space left on device (os error 28)";
DCP gathers every rank's exception as text)."""
_UNSPECIFIC = ("file write failed", "failed writing file", "error while serializing", "unexpected pos")
"""What torch.save says when the OS refused a write ("PytorchStreamWriter failed writing file", "unexpected pos 576
vs 534" on a full disk): no errno, so the filesystem is looked at."""


class StorageError(EmbodiedError):
    """A write failed because the disk is full, a quota is reached, or the directory is read-only or not ours.

    Attributes:
        path: what was being written.
        needed_bytes: what the whole write needed (None when unknown).
        free_bytes: free bytes on that filesystem after the partial write was removed (None when unknown).
    """

    def __init__(self, message: str, *, path: Path, needed_bytes: int | None, free_bytes: int | None) -> None:
        super().__init__(message)
        self.path = path
        self.needed_bytes = needed_bytes
        self.free_bytes = free_bytes


def format_bytes(count: int | None) -> str:
    """``1,234,567 bytes (1.2 MiB)``."""
    if count is None:
        return "an unknown number of bytes"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count:,} bytes ({count / size:.1f} {unit})"
    return f"{count:,} bytes"


def _existing_parent(path: Path) -> Path:
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem of ``path`` (None when it cannot be told)."""
    try:
        stats = os.statvfs(_existing_parent(path))
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(_existing_parent(path)).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def storage_reason(exc: BaseException, path: Path, *, needed_bytes: int | None = None) -> str | None:
    """Why ``exc`` (raised while writing ``path``) is a storage failure, or None when it is something else."""
    for link in _chain(exc):
        if isinstance(link, OSError) and link.errno in _ERRNOS:
            return _ERRNOS[link.errno]
    text = " ".join(str(link) for link in _chain(exc)).lower()
    for needle, code in _TEXTS.items():
        if needle in text:
            return _ERRNOS[code]
    if any(needle in text for needle in _UNSPECIFIC) or isinstance(exc, OSError):
        if _read_only(path):
            return _ERRNOS[errno.EROFS]
        free = free_bytes(path)
        if free is not None and (free == 0 or (needed_bytes is not None and free < needed_bytes)):
            return _ERRNOS[errno.ENOSPC]
    return None


@contextlib.contextmanager
def guard_write(path: Path, *, what: str, needed_bytes: int | Callable[[], int | None] | None = None,
                cleanup: Path | Callable[[], None] | None = None,
                after: str | Callable[[], str] = "") -> Iterator[None]:
    """Runs a write; a storage failure inside becomes a :class:`StorageError` (other errors pass unchanged).

    Args:
        path: the file or directory being written (named in the message; its filesystem is inspected).
        what: what is written, for the message (``"checkpoint step 4"``).
        needed_bytes: the size of the whole write, or a function computing it (called only on failure).
        cleanup: a partial temporary file or directory to remove before the message is made (frees its space), or
            a function that removes what the write left.
        after: a sentence appended to the message (what is still intact), or a function making it.
    """
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        needed = needed_bytes() if callable(needed_bytes) else needed_bytes
        reason = storage_reason(exc, path, needed_bytes=needed)
        if reason is None:
            raise
        with contextlib.suppress(OSError):  # a read-only filesystem keeps the partial write: nothing to free
            if callable(cleanup):
                cleanup()
            elif cleanup is not None and cleanup.is_dir() and not cleanup.is_symlink():
                shutil.rmtree(cleanup)
            elif cleanup is not None:
                cleanup.unlink(missing_ok=True)
        free = free_bytes(path)
        message = (f"{path}: writing {what} failed: {reason}; it needs about {format_bytes(needed)}, "
                   f"{format_bytes(free)} free there")
        if isinstance(cleanup, Path):
            message += f"; the partial write {cleanup} {'is left' if cleanup.exists() else 'was removed'}"
        tail = after() if callable(after) else after
        raise StorageError(message + (f". {tail}" if tail else ""), path=path, needed_bytes=needed,
                           free_bytes=free) from exc
