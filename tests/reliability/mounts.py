"""Real full disks and real read-only filesystems for the disk-fault cases.

ENOSPC comes from a small tmpfs mounted on the output directory; a filesystem going read-only mid-run from ext4 on
a loop device mounted with ``errors=remount-ro``, switched read-only by ext4's own error path
(``/sys/fs/ext4/<dev>/trigger_fs_error``), which works with files still open for writing (a plain
``mount -o remount,ro`` refuses while the run's metrics.jsonl is open). Both need CAP_SYS_ADMIN (root, as in CI);
without it the cases skip with that reason. ``RLIMIT_FSIZE`` was not used: it gives EFBIG, not a full disk.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fill", "loop_ext4", "require_mounts", "tmpfs", "trigger_read_only"]


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)


def require_mounts(scratch: Path) -> None:
    """Skips the calling test unless a tmpfs can be mounted here (root with CAP_SYS_ADMIN)."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a small tmpfs, and mounting one needs root (CAP_SYS_ADMIN); "
                    "RLIMIT_FSIZE would give EFBIG, not ENOSPC")
    probe = scratch / "mount-probe"
    probe.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); the disk-fault cases need one")
    _run("umount", str(probe))


@contextlib.contextmanager
def tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of ``size_bytes`` mounted at ``path`` (created), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path))
    assert done.returncode == 0, f"mount tmpfs at {path}: {done.stderr}"
    try:
        yield path
    finally:
        _run("umount", "-l", str(path))


@contextlib.contextmanager
def loop_ext4(path: Path, size_bytes: int) -> Iterator[str]:
    """ext4 on a loop device mounted at ``path`` with errors=remount-ro; yields the loop device's name."""
    image = path.with_name(path.name + ".img")
    with image.open("wb") as f:
        f.truncate(size_bytes)
    done = _run("mkfs.ext4", "-q", "-F", str(image))
    if done.returncode != 0:
        pytest.skip(f"mkfs.ext4 is not usable here ({done.stderr.strip()[:200]})")
    path.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-o", "loop,errors=remount-ro", str(image), str(path))
    if done.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here ({done.stderr.strip()[:200]})")
    device = Path(_run("findmnt", "-n", "-o", "SOURCE", str(path)).stdout.strip()).name
    try:
        if not Path(f"/sys/fs/ext4/{device}/trigger_fs_error").exists():
            pytest.skip("this kernel has no /sys/fs/ext4/<dev>/trigger_fs_error to make ext4 go read-only")
        yield device
    finally:
        _run("umount", "-l", str(path))
        image.unlink(missing_ok=True)


def trigger_read_only(device: str) -> None:
    """Makes the ext4 filesystem on ``device`` read-only now, as a disk error does (open files included)."""
    Path(f"/sys/fs/ext4/{device}/trigger_fs_error").write_text("embodied fault campaign\n")


def fill(directory: Path, *, leave_bytes: int = 0) -> Path:
    """Fills the filesystem of ``directory`` with one file, then gives back ``leave_bytes``; returns the file."""
    filler = directory / "filler.bin"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as f, contextlib.suppress(OSError):  # unbuffered: nothing left to flush
        while True:
            f.write(chunk)
    size = filler.stat().st_size
    with filler.open("r+b") as f:
        f.truncate(max(0, size - leave_bytes))
    return filler
