"""The decoder's limit for a loader pass: the frames the pass returns, decoded by torchcodec alone in a tight loop.

No dataset code runs in the timed loops: the frames are planned up front (:func:`pass_reads`, from our dataset's
``video_reads``: file and timestamps per sample), then decoded on ``VideoDecoder`` objects opened before the
clock starts (``seek_mode="approximate"``, one FFmpeg thread, frame ``round(t * average_fps)``: what our torchcodec
backend does). Two loops, each timed:

- ``batched``: per batch of the pass, one ``get_frames_at`` per file with the batch's frame indices sorted and
  deduplicated: exactly the decoder calls our loader makes (``LeRobotDataset.decode_batch``). This is the ceiling
  the loader is measured against.
- ``per_sample``: per sample, one ``get_frames_at`` per file with that sample's indices (the calls of a loader that
  decodes sample by sample, as ours did before and lerobot does); overlapping windows decode shared frames again.

Each loop runs twice, alternating with the other, and the faster run counts (a ceiling: the best the decoder did);
likewise the lower CPU time (``time.process_time`` of the loop).

With ``processes`` > 1 the batches are dealt round-robin (batch b to process b % P, as a DataLoader deals them to
its workers); the processes start each loop together and the loop's time is the slowest process's. That measured
figure, not P times the one-process rate, is the fair ceiling for P workers: on a host whose cores are shared
with other jobs, P processes rarely get P whole cores, and the loader's workers face the same host.

Run through ``benchmarks/loader_pass.py --impl ceiling`` (a fresh process per measurement, interleaved with the
loader passes by ``benchmarks/dataloader.py``), or alone::

    .venv/bin/python benchmarks/decode_ceiling.py --dataset DIR --episodes 3,4,5 --items 200 --processes 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

Reads = list[tuple[str, list[float]]]
"""One sample's frames: (video file, timestamps in the file) per camera."""


def pass_reads(dataset: Any, positions: Sequence[int]) -> list[Reads]:
    """The frames each sample at ``positions`` reads (``LeRobotDataset.video_reads``), as plain paths and floats."""
    return [[(str(path), list(times)) for path, times in dataset.video_reads(int(p))] for p in positions]


def _batched_calls(reads: list[Reads], batch_size: int) -> list[list[tuple[str, list[float]]]]:
    """Per batch: (file, sorted distinct timestamps) per file, in first-use order (as ``decode_batch`` groups)."""
    calls = []
    for start in range(0, len(reads), batch_size):
        per_file: dict[str, dict[float, None]] = {}
        for sample in reads[start:start + batch_size]:
            for path, times in sample:
                per_file.setdefault(path, {}).update(dict.fromkeys(times))
        calls.append([(path, sorted(times)) for path, times in per_file.items()])
    return calls


def _decode_loop(decoders: dict[str, Any], jobs: list[list[tuple[str, list[float]]]]) -> tuple[float, float, int]:
    """Wall seconds and CPU seconds (this process) to decode every job's frames, and how many frames came back."""
    returned = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    for job in jobs:
        for path, times in job:
            decoder = decoders[path]
            fps = decoder.metadata.average_fps
            returned += len(decoder.get_frames_at(indices=[round(t * fps) for t in times]).pts_seconds)
    return time.perf_counter() - start, time.process_time() - cpu_start, returned


def _open(paths: Sequence[str]) -> dict[str, Any]:
    from torchcodec.decoders import VideoDecoder

    decoders = {}
    for path in paths:
        decoders[path] = VideoDecoder(path, seek_mode="approximate", dimension_order="NCHW", num_ffmpeg_threads=1)
        decoders[path].get_frames_at(indices=[0])  # warm-up: the first decode allocates the conversion context
    return decoders


def _share(jobs: list[Any], rank: int, processes: int) -> list[Any]:
    return jobs[rank::processes]


def _run(reads: list[Reads], batch_size: int, rank: int, processes: int, barrier: Any = None,
         results: Any = None) -> dict[str, float]:
    """One process's loops over its share of the batches (all of them with one process)."""
    batched = _share(_batched_calls(reads, batch_size), rank, processes)
    samples = [sample for b in _share(list(range(0, len(reads), batch_size)), rank, processes)
               for sample in reads[b:b + batch_size]]
    decoders = _open(sorted({path for sample in reads for path, _ in sample}))
    out: dict[str, float] = {}
    for name, jobs in (("per_sample", samples), ("batched", batched)) * 2:  # alternated, the faster of two kept
        if barrier is not None:
            barrier.wait()
        seconds, cpu, out[f"{name}_decoded"] = _decode_loop(decoders, jobs)
        out[f"{name}_s"] = min(seconds, out.get(f"{name}_s", seconds))
        out[f"{name}_cpu_s"] = min(cpu, out.get(f"{name}_cpu_s", cpu))
    if results is not None:
        results.put(out)
    return out


def decode_ceiling(reads: list[Reads], *, batch_size: int, processes: int = 1) -> dict[str, Any]:
    """Times both loops (see the module doc) with ``processes`` processes side by side.

    Returns:
        ``ceiling_batched_s`` / ``ceiling_per_sample_s`` (the slowest process's loop), ``ceiling_batched_cpu_s`` /
        ``ceiling_per_sample_cpu_s`` (CPU seconds of the loop summed over the processes, each its lower of two
        runs: the figure that holds on a host shared with other jobs), the frames the pass returns
        (``frames_returned``), and the frames each loop asked the decoder for (``decoded_batched`` /
        ``decoded_per_sample``: distinct per batch and file vs per sample).
    """
    import torchcodec.decoders  # noqa: F401 - imported before the fork, as our loader's workers inherit it

    if processes == 1:
        per_process = [_run(reads, batch_size, 0, 1)]
    else:
        context = mp.get_context("fork")
        barrier, results = context.Barrier(processes), context.Queue()
        workers = [context.Process(target=_run, args=(reads, batch_size, rank, processes, barrier, results))
                   for rank in range(processes)]
        for worker in workers:
            worker.start()
        per_process = [results.get(timeout=1800) for _ in workers]
        for worker in workers:
            worker.join()
    frames = sum(len(times) for sample in reads for _, times in sample)
    return {"processes": processes, "frames_returned": frames,
            "ceiling_batched_s": max(r["batched_s"] for r in per_process),
            "ceiling_per_sample_s": max(r["per_sample_s"] for r in per_process),
            "ceiling_batched_cpu_s": sum(r["batched_cpu_s"] for r in per_process),
            "ceiling_per_sample_cpu_s": sum(r["per_sample_cpu_s"] for r in per_process),
            "decoded_batched": int(sum(r["batched_decoded"] for r in per_process)),
            "decoded_per_sample": int(sum(r["per_sample_decoded"] for r in per_process))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--episodes", required=True, help="comma-separated episodes")
    parser.add_argument("--items", type=int, default=200, help="random positions read")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    known, rest = parser.parse_known_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from loader_pass import build_ours

    query = argparse.ArgumentParser()
    query.add_argument("--camera", default="image")
    query.add_argument("--state-key", default="state")
    query.add_argument("--action-key", default="actions")
    query.add_argument("--horizon", type=int, default=50)
    query.add_argument("--camera-frames", type=int, default=1)
    query.add_argument("--batch-size", type=int, default=8)
    opts = query.parse_args(rest)
    opts.dataset, opts.episodes = known.dataset, [int(e) for e in known.episodes.split(",")]
    dataset = build_ours(opts)
    positions = random.Random(known.seed).sample(range(len(dataset)), known.items)
    result = decode_ceiling(pass_reads(dataset, positions), batch_size=opts.batch_size, processes=known.processes)
    frames = result["frames_returned"]
    print(json.dumps(result))
    print(f"{frames} frames: batched {frames / result['ceiling_batched_s']:.1f} frames/s, per sample "
          f"{frames / result['ceiling_per_sample_s']:.1f} frames/s ({known.processes} process(es))")


if __name__ == "__main__":
    main()
