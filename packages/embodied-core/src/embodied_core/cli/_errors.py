"""Turning exceptions into exit codes: 2 for usage/config errors, 1 for runtime failures."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from embodied_core.errors import EmbodiedError, UsageError

__all__ = ["run_guarded", "setup_logging"]


def setup_logging() -> None:
    """INFO on rank 0 with a rank prefix under torchrun; WARNING on other ranks."""
    import os

    rank = int(os.environ.get("RANK", "0"))
    prefix = f"[rank{rank}] " if "RANK" in os.environ else ""
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s {prefix}%(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S",
                        stream=sys.stderr)


def run_guarded(prog: str, run: Callable[[], int]) -> int:
    """Runs ``run``; usage errors print ``prog: error: ...`` and return 2, runtime errors return 1."""
    setup_logging()
    try:
        return run()
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except EmbodiedError as exc:
        print(f"{prog}: failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
