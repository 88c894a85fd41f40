"""Turning exceptions into exit codes: 2 for usage/config errors, 1 for runtime failures."""

from __future__ import annotations

import errno
import logging
import sys
import time
from collections.abc import Callable

from embodied_core.errors import EmbodiedError, UsageError

__all__ = ["OTHER_RANKS_GRACE_S", "run_guarded", "setup_logging"]

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})
"""OSErrors that say the disk is full or read-only (reported without a traceback)."""
OTHER_RANKS_GRACE_S = 5.0
"""Seconds a rank other than 0 waits before exiting on a usage error (rank 0 prints it meanwhile)."""


def setup_logging() -> None:
    """INFO on rank 0 with a rank prefix under torchrun; WARNING on other ranks."""
    import os

    rank = int(os.environ.get("RANK", "0"))
    prefix = f"[rank{rank}] " if "RANK" in os.environ else ""
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s {prefix}%(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S",
                        stream=sys.stderr)


def _is_rank_zero() -> bool:
    """False only on a non-zero rank of a complete launch environment (torchrun's), where rank 0 exists and
    validates the same config; a half-set environment prints everywhere, since it may have no rank 0."""
    import os

    launched = all(os.environ.get(name) for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
    return not launched or os.environ["RANK"].strip() == "0"


def run_guarded(prog: str, run: Callable[[], int]) -> int:
    """Runs ``run``; usage errors print ``prog: error: ...`` (on rank 0 only) and return 2, runtime errors
    return 1."""
    setup_logging()
    try:
        return run()
    except UsageError as exc:
        # Under torchrun every rank validates the same config: rank 0 alone prints the message, once. The other
        # ranks wait a moment before exiting, since torchrun stops every process as soon as the first one exits
        # and rank 0 must not be stopped before it printed.
        if _is_rank_zero():
            print(f"{prog}: error: {exc}", file=sys.stderr)
        else:
            time.sleep(OTHER_RANKS_GRACE_S)
        return 2
    except EmbodiedError as exc:
        print(f"{prog}: failed: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        # a full disk or a directory gone read-only in code that wrote without guard_write: the message, no
        # traceback (any other OSError is a bug and keeps its traceback)
        if exc.errno not in STORAGE_ERRNOS:
            raise
        print(f"{prog}: failed: {exc.filename or 'a write'}: {exc.strerror}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
