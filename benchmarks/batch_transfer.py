"""What handing one collated batch from a loader worker to the trainer costs in memory traffic alone.

A DataLoader worker collates each batch into a fresh shared-memory segment (``model_api.collate_samples`` writes
straight into ``torch.UntypedStorage._new_shared`` inside a worker, as torch's default collate does), so every batch
pays the kernel's zero-filled page faults on top of the copy. This script times, for batches the size the shared
datasets give (default: lingzu's 480x640 frames, batch 8, 1 and 9 camera frames per sample), one batch's:

- ``fresh shared``: a new shared segment + the copy into it (what a worker does today);
- ``fresh heap``: a new heap buffer + the copy (the main process at 0 workers, glibc's default thresholds);
- ``reused``: the copy into a buffer kept from the previous batch (the floor: a pool of segments recycled once the
  trainer has released them would pay this).

Ratios are against ``reused`` in the same process. Usage: ``.venv/bin/python benchmarks/batch_transfer.py
[--frames 1 9] [--rounds 10]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch


def _median_ms(fn: Callable[[], object], rounds: int) -> float:
    fn()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure(nbytes: int, rounds: int) -> dict[str, float]:
    """Median ms per batch of ``nbytes`` for each way of getting the bytes into the batch's buffer."""
    source = torch.randint(0, 256, (nbytes,), dtype=torch.uint8)
    kept = torch.empty(nbytes, dtype=torch.uint8)

    def fresh_shared() -> None:
        storage = torch.UntypedStorage._new_shared(nbytes)
        torch.empty(0, dtype=torch.uint8).set_(storage).copy_(source)

    return {"fresh shared": _median_ms(fresh_shared, rounds),
            "fresh heap": _median_ms(lambda: torch.empty(nbytes, dtype=torch.uint8).copy_(source), rounds),
            "reused": _median_ms(lambda: kept.copy_(source), rounds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[1, 9], help="camera frames per sample")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--rounds", type=int, default=10)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    for frames in opts.frames:
        nbytes = opts.batch * frames * 3 * opts.height * opts.width
        figures = measure(nbytes, opts.rounds)
        floor = figures["reused"]
        line = ", ".join(f"{name} {ms:.1f} ms ({ms / floor:.2f}x)" for name, ms in figures.items())
        print(f"batch {opts.batch} x {frames} frame(s) x 3x{opts.height}x{opts.width} uint8 "
              f"({nbytes / 2**20:.0f} MiB): {line}")


if __name__ == "__main__":
    main()
