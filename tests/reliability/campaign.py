"""The fault campaign of issue 28: every case, at full size, with figures; prints held/tried per group.

    python -m tests.reliability.campaign                 # everything (about 10 minutes on 2 cores)
    python -m tests.reliability.campaign --group serve --load-seconds 60 --clients 16 --fuzz-frames 20000
    python -m tests.reliability.campaign --quick         # the suite's sizes

Groups: ``serve`` (load from real openpi clients, every hostile frame followed by a good request, the limits, the
API key, silent connections, a client that stops reading, fuzzing), ``dist`` (a rank killed mid-step,
mid-all-reduce, mid-DCP-save and the store host killed; a loader error on one rank; resume after the kills),
``disk`` and ``policy`` (the cases of ``test_disk_faults.py`` and ``test_policy_references.py``, which have no size
to scale: run through pytest, one case per test). The bounded version of every group runs in the test suite
(``tests/reliability/``). Exit code 0 when every case held.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.reliability.serve_cases import Outcome

GROUPS = ("serve", "dist", "disk", "policy")


def _policy_checkpoint(root: Path) -> tuple[Path, Path]:
    """A real pi05_tiny policy folder trained 6 steps on a synthetic reaching dataset (as the suite's fixture)."""
    from embodied_core.trainer.api import Trainer
    from embodied_data.synth import SynthConfig, write_synthetic_dataset

    data = root / "synth_reach"
    write_synthetic_dataset(data, SynthConfig(num_episodes=8, min_length=20, max_length=24, image_size=(64, 64),
                                              seed=3))
    out = root / "run"
    Trainer({"training": {"model_name": "pi05_tiny", "dataset_format": "lerobot_datasets", "dataset_path": str(data),
                          "train_iters": 6, "save_interval": 6, "dtype": "float32", "per_device_batch_size": 4,
                          "num_workers": 0, "lr_warmup_iters": 0, "log_interval": 6, "output_dir": str(out)},
             "data": {"state_dim": 2, "action_dim": 2}}).train()
    return data, out / "checkpoints" / "step_6"


def serve_group(root: Path, args: argparse.Namespace) -> list[Outcome]:
    """Starts one ``embodied serve`` with small limits and runs every serve case against it."""
    from tests.eval.serve_support import ServeProcess, dataset_observations
    from tests.reliability import serve_cases as cases

    data, checkpoint = _policy_checkpoint(root)
    key, limit, idle, handshake, slots = "campaign-key-28", 400_000, 2.0, 1.0, 20
    key_file = root / "key.txt"
    key_file.write_text(key + "\n")
    server = ServeProcess(str(checkpoint), "--api-key-file", str(key_file), "--max-message-bytes", str(limit),
                          "--max-connections", str(slots), "--idle-timeout", str(idle), "--handshake-timeout",
                          str(handshake))
    good = dataset_observations(data, [3])[0]
    shape, pid = (10, 2), server.proc.pid
    log = lambda: "\n".join(server.banner) + "".join(server._errors)  # noqa: E731
    try:
        outcomes = [cases.openpi_load(server.url, key, good, shape, pid=pid, clients=args.clients,
                                      seconds=args.load_seconds, workdir=root)]
        outcomes += cases.hostile_inputs(server.url, key, good, shape)
        outcomes += [cases.oversized_message(server.url, key, good, shape, limit=limit),
                     cases.api_key_refusals(server.url, key, good, shape, server_log=log),
                     cases.connection_limit(server.url, key, good, shape, max_connections=slots, idle_timeout_s=idle),
                     cases.silent_sockets(server.url, key, good, shape, pid=pid, count=200,
                                          handshake_timeout_s=handshake),
                     cases.non_reader(server.url, key, good, shape, pid=pid, requests=args.unread_requests,
                                      idle_timeout_s=idle),
                     cases.fuzz(server.url, key, good, shape, frames=args.fuzz_frames, seed=28)]
        alive = server.proc.poll() is None
        outcomes.append(Outcome("server alive after every case", alive, f"exit code {server.proc.poll()}"))
    finally:
        code, _, err = server.stop()
    outcomes.append(Outcome("SIGTERM stops the server cleanly", code == 0 and "Traceback" not in err,
                            f"exit code {code}"))
    return outcomes


def dist_group(root: Path, args: argparse.Namespace) -> list[Outcome]:
    """Every distributed fault, one launch each, then one launch resuming the killed runs."""
    from tests.reliability.dist_cases import launch, losses, training

    kills = {"killed mid-step (forward), torchrun as 2 nodes": ("kill_step", 1, 3, "torchrun2", {}),
             "killed mid-all-reduce, platform launch": ("kill_allreduce", 1, 3, "platform", {}),
             "killed mid-DCP-save, torchrun as 2 nodes": ("kill_dcp_save", 1, 4, "torchrun2", {"save_format": "dcp"}),
             "rank 0 (store host) killed mid-step, platform launch": ("kill_step", 0, 3, "platform", {})}
    outcomes, resumable = [], []
    for i, (name, (kind, rank, step, style, extra)) in enumerate(kills.items()):
        run = training(root / f"kill{i}", **extra)
        job = launch(root, [run], style=style, fault={"kind": kind, "rank": rank, "step": step})
        survivor = 1 - rank
        lines = [line for line in job.logs[survivor].splitlines() if "failed:" in line and "embodied" in line]
        message = lines[-1] if lines else "(no message)"
        named = "store at" in message if rank == 0 else f"rank {rank} stopped responding" in message
        after = job.seconds_after_kill(survivor)
        held = not job.timed_out and job.codes[survivor] == 1 and named
        outcomes.append(Outcome(name, held, f"survivor exit {job.codes[survivor]} {after:.1f} s after the kill: "
                                            f"{message[:220]}" if after is not None else job.text[-800:],
                                {"exit_after_kill_s": after}))
        if rank == 1:
            resumable.append({**run, "resume": True})
    job = launch(root, [training(root / "loader")], style="torchrun1", fault={"kind": "loader", "rank": 1, "step": 3})
    error = "rank 1 failed: DataError: sample 24"
    both = error in job.text and "every other rank stops with it" in job.text and "rank 0 stops too" in job.text
    held = both and not job.timed_out and 0 not in job.codes
    outcomes.append(Outcome("data loader raising on rank 1, torchrun", held,
                            f"exit codes {job.codes} after {job.seconds:.1f} s; both ranks printed "
                            f"'{error}...': {both}"))
    job = launch(root, [*resumable, training(root / "straight")], style="torchrun1", fault=None)
    reference = losses(root / "straight") if job.codes == [0] else {}
    for run in resumable:
        out = Path(run["output_dir"])
        exact = bool(reference) and losses(out) == reference
        outcomes.append(Outcome(f"--resume of {out.name} continues bit for bit", exact,
                                f"launch exit {job.codes}; losses equal to the uninterrupted run: {exact}"))
    return outcomes


def pytest_group(files: list[str]) -> list[Outcome]:
    """Runs test files through pytest in this process; one case per test."""
    import pytest

    class Collect:
        def __init__(self) -> None:
            self.outcomes: list[Outcome] = []

        def pytest_runtest_logreport(self, report: Any) -> None:
            if report.when == "call" or (report.when == "setup" and not report.passed):
                detail = "passed" if report.passed else (report.longreprtext.splitlines() or ["skipped"])[-1][:300]
                self.outcomes.append(Outcome(report.nodeid.split("::")[-1], report.passed, detail))

    collector = Collect()
    here = Path(__file__).parent
    pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", *[str(here / f) for f in files]],
                plugins=[collector])
    return collector.outcomes


def _print(group: str, outcomes: list[Outcome], seconds: float) -> None:
    held = sum(o.held for o in outcomes)
    print(f"\n== {group}: {held}/{len(outcomes)} held ({seconds:.0f} s)")
    for o in outcomes:
        print(f"  [{'held' if o.held else 'FAILED'}] {o.name}: {o.detail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.campaign", description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", action="append", choices=GROUPS, help="run only these groups (repeatable)")
    parser.add_argument("--quick", action="store_true", help="the suite's sizes (4 clients for 2 s, 2,000 frames)")
    parser.add_argument("--clients", type=int, default=16, help="openpi clients of the load case (default 16)")
    parser.add_argument("--load-seconds", type=float, default=60.0, help="length of the load case (default 60)")
    parser.add_argument("--fuzz-frames", type=int, default=20_000, help="mutated frames (default 20,000)")
    parser.add_argument("--unread-requests", type=int, default=300, help="requests of the non-reading client")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.load_seconds, args.fuzz_frames, args.unread_requests = 4, 2.0, 2000, 12
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    runners: dict[str, Callable[[Path], list[Outcome]]] = {
        "serve": lambda root: serve_group(root, args),
        "dist": lambda root: dist_group(root, args),
        "disk": lambda root: pytest_group(["test_disk_faults.py"]),
        "policy": lambda root: pytest_group(["test_policy_references.py"]),
    }
    totals = []
    for group in args.group or GROUPS:
        root = Path(tempfile.mkdtemp(prefix=f"campaign_{group}_"))
        started = time.perf_counter()
        try:
            outcomes = runners[group](root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        _print(group, outcomes, time.perf_counter() - started)
        totals.append((group, sum(o.held for o in outcomes), len(outcomes)))
    print("\n" + "  ".join(f"{g} {h}/{t}" for g, h, t in totals))
    return 0 if all(h == t for _, h, t in totals) else 1


if __name__ == "__main__":
    sys.exit(main())
