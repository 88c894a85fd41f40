"""Reuse of batch-sized memory in the processes that read data (glibc's malloc only).

A loader makes a few large blocks per batch: the decoder's frames (a batch of 9-frame 640x480 windows: 66 MB from one
file) and the collated batch. glibc serves a block above its mmap threshold (dynamic, at most 32 MiB) with a fresh
``mmap`` and returns it to the kernel on free, so every batch pays the page faults of touching new memory again:
about 30 ms per 66 MB batch on this project's CI machine, a third of a 0-worker pass of video windows. Raising the
mmap threshold above any batch and the trim threshold above a few batches keeps those blocks in the heap, where the
next batch reuses them (what jemalloc or tcmalloc, which torch's performance guide recommends preloading, do by
design).

:func:`keep_batch_memory` is applied once per process by :class:`~embodied_core.data.loader.ResumableLoader`: in
each DataLoader worker as it starts, or in the main process when it reads the data itself (0 workers). It changes
nothing when the process does not use glibc, and it leaves the allocator alone when the user has tuned it (any of
``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_`` or a ``glibc.malloc`` tunable in
``GLIBC_TUNABLES`` set), which is also how to opt out: e.g. ``MALLOC_MMAP_THRESHOLD_=131072`` restores glibc's own
starting value. The cost is memory a process keeps after a batch is freed: at most ``TRIM_THRESHOLD_BYTES`` at the
top of its heap, which the next batch reuses.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "keep_batch_memory", "user_tuned_malloc"]

MMAP_THRESHOLD_BYTES = 1 << 30
"""Blocks up to this size (1 GiB) come from the heap; a larger one still gets its own mapping."""
TRIM_THRESHOLD_BYTES = 2 << 30
"""Free memory at the top of the heap kept for reuse (2 GiB) before glibc hands it back to the kernel."""

# glibc's <malloc.h> parameter numbers
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_applied_in_pid: int | None = None


def user_tuned_malloc(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """Whether the environment already tunes glibc's malloc thresholds (then :func:`keep_batch_memory` keeps out)."""
    environ = os.environ if environ is None else environ
    return any(name in environ for name in _USER_SETTINGS) or "glibc.malloc" in environ.get("GLIBC_TUNABLES", "")


def keep_batch_memory() -> bool:
    """Raises this process's malloc mmap and trim thresholds (once per process, forks included); True when they
    are set now or were set earlier in this process, False when left alone (not glibc, or tuned by the user)."""
    global _applied_in_pid
    pid = os.getpid()
    if _applied_in_pid == pid:
        return True
    if platform.libc_ver()[0] != "glibc" or user_tuned_malloc():
        return False
    # The process's own symbols (glibc is loaded): ctypes.util.find_library would run ``ldconfig -p`` in a
    # subprocess, 3-5 ms of every DataLoader worker's start.
    libc = ctypes.CDLL(None)
    # mallopt returns 1 on success; the mmap threshold first, so the trim threshold is not re-derived from it
    if not (libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) and libc.mallopt(_M_TRIM_THRESHOLD,
                                                                                   TRIM_THRESHOLD_BYTES)):
        return False
    _applied_in_pid = pid
    return True
