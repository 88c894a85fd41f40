"""Profiling a window of update steps: ``--use-pytorch-profiler`` and ``--use-nsys-profiler``.

The window is ``--profile-step-start .. --profile-step-end`` (inclusive) in absolute update steps, the step numbers
of ``metrics.jsonl``; a resumed run profiles the part of the window it runs. Only ``--profile-ranks`` profile.

- PyTorch profiler: ``torch.profiler`` records CPU (and CUDA) activity with ``record_shapes`` and
  ``profile_memory``; every step is a ``ProfilerStep#<step>`` range (how TensorBoard's profiler plugin and
  Perfetto split steps), and one Chrome-format trace per rank (``rank<r>.<time>.pt.trace.json``) is written
  under ``--profile-output-dir`` (default ``<output-dir>/profiler``) when the window ends.
- nsys: ``cudaProfilerStart`` / ``cudaProfilerStop`` around the window and an NVTX range per step, for
  ``nsys profile --capture-range=cudaProfilerApi``; CUDA only (the check at validation says so).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from embodied_core.config.training_args import TrainingArgs

__all__ = ["StepProfiler", "build_step_profiler", "profiler_problems", "trace_dir"]

logger = logging.getLogger("embodied.train")


def trace_dir(args: TrainingArgs) -> Path:
    """Where traces go: ``--profile-output-dir``, else ``<output-dir>/profiler``."""
    return Path(args.profile_output_dir) if args.profile_output_dir else Path(args.output_dir) / "profiler"


def profiler_problems(args: TrainingArgs, *, world_size: int, cuda: bool) -> list[str]:
    """Problems of the profiling flags (run at validation, before anything is built)."""
    problems = []
    if args.use_pytorch_profiler and args.use_nsys_profiler:
        problems.append("--use-pytorch-profiler and --use-nsys-profiler exclude each other; choose one")
    if args.use_nsys_profiler and not cuda:
        problems.append("--use-nsys-profiler needs CUDA (it brackets the window with cudaProfilerStart/Stop for "
                        "nsys) and no CUDA device is available; use --use-pytorch-profiler on this machine")
    if args.profile_step_end < args.profile_step_start:
        problems.append(f"--profile-step-end {args.profile_step_end} is before --profile-step-start "
                        f"{args.profile_step_start}; the window is start..end, inclusive")
    wrong = [r for r in args.profile_ranks if not 0 <= r < world_size]
    if wrong:
        problems.append(f"--profile-ranks {' '.join(map(str, wrong))}: no such rank (world size {world_size}; valid: "
                        f"0..{world_size - 1})")
    return problems


class StepProfiler:
    """Profiles the steps of the window on this rank; :meth:`step` wraps one update step.

    Args:
        kind: ``"pytorch"``, ``"nsys"`` or None (profiles nothing).
        start, end: the window (absolute update steps, inclusive).
        rank: this process's rank (names the trace).
        directory: trace directory (PyTorch profiler).
    """

    def __init__(self, kind: str | None, *, start: int, end: int, rank: int, directory: Path) -> None:
        self.kind = kind
        self.start, self.end = start, end
        self.rank = rank
        self.directory = directory
        self._profile: Any = None
        self.active = False

    def _begin(self, step: int) -> None:
        if self.kind == "pytorch":
            from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

            self.directory.mkdir(parents=True, exist_ok=True)
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
            self._profile = profile(activities=activities, record_shapes=True, profile_memory=True,
                                    on_trace_ready=tensorboard_trace_handler(str(self.directory),
                                                                             worker_name=f"rank{self.rank}"))
            self._profile.start()
        else:
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStart()
        self.active = True
        logger.info("profiling steps %d..%d (%s profiler) on rank %d", step, self.end, self.kind, self.rank)

    def _finish(self) -> None:
        if not self.active:
            return
        self.active = False
        if self.kind == "pytorch":
            self._profile.stop()  # writes the trace (on_trace_ready)
            self._profile = None
            logger.info("profiler trace of rank %d written under %s", self.rank, self.directory)
        else:
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()

    @contextlib.contextmanager
    def step(self, step: int) -> Iterator[None]:
        """Wraps update ``step`` (1-based): starts the profiler on the window's first step this run reaches,
        labels the step, and stops (writing the trace) after the window's last step."""
        if self.kind is None or not self.start <= step <= self.end:
            yield
            return
        if not self.active:
            self._begin(step)
        if self.kind == "pytorch":
            with torch.profiler.record_function(f"ProfilerStep#{step}"):
                yield
        else:
            torch.cuda.nvtx.range_push(f"step {step}")
            try:
                yield
            finally:
                torch.cuda.nvtx.range_pop()
        if step == self.end:
            self._finish()

    def close(self) -> None:
        """Stops a profiler still running (a run that ended, or failed, inside the window)."""
        self._finish()


def build_step_profiler(args: TrainingArgs, *, rank: int) -> StepProfiler:
    """The profiler the flags ask for on this rank (one that profiles nothing otherwise)."""
    kind = "pytorch" if args.use_pytorch_profiler else "nsys" if args.use_nsys_profiler else None
    window = {"profile_step_start": 10, "profile_step_end": 12, "profile_ranks": [0], "profile_output_dir": None}
    unused = [name for name, default in window.items() if getattr(args, name) != default]
    if kind is None and unused and rank == 0:
        logger.warning("%s set without --use-pytorch-profiler or --use-nsys-profiler: nothing is profiled",
                       ", ".join("--" + name.replace("_", "-") for name in unused))
    if kind is not None and rank not in args.profile_ranks:
        kind = None
    return StepProfiler(kind, start=args.profile_step_start, end=args.profile_step_end, rank=rank,
                        directory=trace_dir(args))
