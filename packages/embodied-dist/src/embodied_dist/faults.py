"""When one rank of a job fails, every rank stops, and says which rank it was.

Two failures look alike from a surviving rank - a collective that raises (gloo: the peer's connection closed) or
never returns - but need different answers:

- **a rank dies** (SIGKILL, out of memory, a lost node): its connections close and the survivors' collective
  raises at once (or, for a rank that hangs, after ``--distributed-timeout-minutes``). Every rank bumps a
  heartbeat counter in the job's rendezvous store from a background thread; the survivor compares the counters
  over a few intervals and names the ranks whose counter stopped (a thread that keeps beating while its main
  thread computes, so a slow step never looks dead).
- **a rank raises** (its data loader fails, a NaN check, a bug): it records its error in the store before
  anything else; every other rank's monitor thread sees it within one interval, prints the same error naming
  that rank and stops its process (it may be blocked in a collective the failing rank will never join), then
  acknowledges; the failing rank waits for the acknowledgements (a few seconds at most) and raises its error.
  No rank is left waiting, and under ``torchrun`` every rank has printed the error before the agent stops the
  others.

The store is the launch's (``MASTER_ADDR:MASTER_PORT``: torchrun's agent store, or rank 0's when a platform
launcher starts the ranks); when it is hosted by the rank that died, that is what the message says.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
import threading
import time
from typing import Any

import torch.distributed as dist

__all__ = ["FaultMonitor", "is_collective_failure"]

logger = logging.getLogger("embodied.dist")

HEARTBEAT_S = 0.5
"""Interval of the heartbeat counters and of the check for another rank's recorded error."""
SILENCE_S = 3.0
"""A rank whose heartbeat did not move for this long (6 intervals) is reported as dead or hung."""
ACK_GRACE_S = 8.0
"""How long a failing rank waits for the others to report its error before raising it."""
_GLOO_FAILURES = ("connection closed by peer", "connection reset by peer", "broken pipe", "timed out",
                  "timeout", "socket closed", "connection refused", "read error", "write error",
                  "gloo/transport", "failed to recv", "failed to send")

_generation = 0  # monitors created in this process: every rank creates them in the same order


def is_collective_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a failed collective or store operation."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, dist.DistError):
            return True
        text = str(exc).lower()
        if isinstance(exc, RuntimeError) and any(marker in text for marker in _GLOO_FAILURES):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class FaultMonitor:
    """Heartbeats, recorded errors and their acknowledgements of one training run, in the launch's store.

    Args:
        rank, world_size: this process in the job.
        host, port: the rendezvous store (``MASTER_ADDR`` / ``MASTER_PORT``).
    """

    def __init__(self, *, rank: int, world_size: int, host: str, port: int) -> None:
        global _generation
        _generation += 1
        self.rank, self.world_size = rank, world_size
        self.host, self.port = host, port
        prefix = f"embodied/faults/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{_generation}"
        # clients of their own (one per thread), so a store call never waits behind the other thread's
        self._beat_store = self._client(prefix)
        self._store = self._client(prefix)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="embodied-fault-monitor", daemon=True)

    def _client(self, prefix: str) -> Any:
        tcp = dist.TCPStore(self.host, self.port, is_master=False, timeout=datetime.timedelta(seconds=10),
                            wait_for_workers=False)
        return dist.PrefixStore(prefix, tcp)

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> FaultMonitor:
        """Starts the heartbeat thread."""
        self._beat_store.add(f"beat/{self.rank}", 1)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the heartbeat thread (a run that ends normally)."""
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._beat_store.add(f"beat/{self.rank}", 1)
                recorded = self._recorded(self._beat_store)
            except Exception:  # the store is gone (its host died): the main thread reports it when it fails
                continue
            if recorded is not None and not recorded.startswith(f"rank {self.rank} "):
                self._stop_with(recorded)

    def _stop_with(self, recorded: str) -> None:
        """Another rank failed: say so, acknowledge, and end this process (its main thread may be blocked in a
        collective the failed rank will never join) once the failed rank has ended, so that a launcher reports
        that rank as the first failure (or after a few seconds at most)."""
        print(f"embodied: failed: {recorded}; rank {self.rank} stops too (no rank is left waiting for it)",
              file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            self._beat_store.add("acks", 1)
            failed = int(recorded.split()[1])
            deadline, last, still = time.monotonic() + ACK_GRACE_S, -1, time.monotonic()
            while time.monotonic() < deadline and time.monotonic() - still < 4 * HEARTBEAT_S:
                beat = int(self._beat_store.add(f"beat/{failed}", 0))
                if beat != last:
                    last, still = beat, time.monotonic()
                time.sleep(HEARTBEAT_S / 2)
        logging.shutdown()
        os._exit(1)

    # ------------------------------------------------------------------------------------------ queries
    @staticmethod
    def _recorded(store: Any) -> str | None:
        if not store.check(["error"]):
            return None
        return store.get("error").decode("utf-8", "replace")

    def recorded_error(self) -> str | None:
        """The error a rank recorded (``"rank R failed: Type: message"``), or None (also when the store is gone:
        :meth:`silent_ranks` says so)."""
        try:
            with self._lock:
                return self._recorded(self._store)
        except Exception:
            return None

    def record(self, text: str) -> None:
        """Prints and records this rank's error (the first recorded error wins), then waits up to
        :data:`ACK_GRACE_S` for the other ranks to report it."""
        message = f"rank {self.rank} failed: {text}"
        print(f"embodied: failed: {message}; every other rank stops with it", file=sys.stderr, flush=True)
        with self._lock, contextlib.suppress(Exception):  # no store: the others' collectives fail instead
            self._store.compare_set("error", "", message)
            deadline = time.monotonic() + ACK_GRACE_S
            while time.monotonic() < deadline and int(self._store.add("acks", 0)) < self.world_size - 1:
                time.sleep(0.1)

    def silent_ranks(self, wait_s: float = SILENCE_S) -> list[int] | None:
        """Ranks whose heartbeat does not move over ``wait_s`` seconds; None when the store is unreachable."""
        keys = [f"beat/{r}" for r in range(self.world_size)]
        try:
            with self._lock:
                before = [int(self._store.add(k, 0)) for k in keys]
            time.sleep(wait_s)
            with self._lock:
                after = [int(self._store.add(k, 0)) for k in keys]
        except Exception:
            return None
        return [r for r in range(self.world_size) if r != self.rank and after[r] == before[r]]
