"""Distributed fault cases: two gloo processes training the deterministic tiny model, one of them failing.

Launch styles: ``torchrun`` on one node (2 processes), ``torchrun`` as two nodes on this machine (one process
each, one agent per node: what a multi-node job looks like to a survivor, whose own agent does not stop it), and
``platform`` (the two ranks started directly with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, as a cluster
scheduler does; rank 0 hosts the rendezvous store). Every launch has a hard timeout: a hang fails the case.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs

from tests.dist._launch import MODEL, free_port
from tests.support import REPO_ROOT, clean_env, recipe_env

WORKER = Path(__file__).resolve().with_name("_fault_worker.py")
TORCHRUN_SHIM = str(REPO_ROOT / "tests" / "bin" / "torchrun")
"""torchrun on the PATH of the launches (a warm launch: tests/bin/torchrun)."""


@attrs.define
class Launch:
    """What a launch left: exit codes (per process or per torchrun agent), their logs, and its wall time."""

    codes: list[int | None]
    logs: list[str]
    seconds: float
    timed_out: bool
    ended: list[float | None] = attrs.field(factory=list)
    """Wall-clock time (time.time()) each process ended."""

    def seconds_after_kill(self, index: int) -> float | None:
        """How long process ``index`` lived after the injected kill (None without one)."""
        found = re.search(r"injected fault: rank \d+ is killed at ([\d.]+)", self.text)
        if not found or self.ended[index] is None:
            return None
        return self.ended[index] - float(found.group(1))

    @property
    def text(self) -> str:
        return "\n".join(self.logs)


def training(out: Path, **extra: Any) -> dict[str, Any]:
    """The tiny deterministic model on dummy data (the distributed tests' settings), DDP, a checkpoint every 2."""
    base = {"model_name": "tiny_flow_det", "dataset_format": "dummy_datasets", "num_samples": 64, "dtype": "float32",
            "num_workers": 0, "per_device_batch_size": 4, "train_iters": 6, "lr_base": 1e-3, "lr_warmup_iters": 1,
            "lr_decay_iters": 8, "clip_grad": 0.1, "save_interval": 2, "seed": 5, "log_interval": 1,
            "output_dir": str(out), "detail_log_interval": 0, "distributed_strategy": "ddp",
            "distributed_timeout_minutes": 1.0}
    return {**base, **extra}


def launch(workdir: Path, runs: list[dict[str, Any]], *, fault: dict[str, Any] | None, style: str,
           timeout: float = 180) -> Launch:
    """Runs one 2-process job training ``runs`` (training dicts) in turn, the fault armed in run ``fault["run"]``
    (default the first); never raises for a failed job (the caller checks)."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workdir / f"spec_{time.monotonic_ns()}.json"
    spec.write_text(json.dumps({"runs": [{"training": t} for t in runs], "model": MODEL, "fault": fault}))
    port = free_port()
    env = clean_env(PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
                    OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if style.startswith("torchrun"):
        env = recipe_env(env)  # `torchrun` (tests/bin/torchrun): the launch runs warm, as a process of its own
    if style == "torchrun1":
        commands = [[TORCHRUN_SHIM, "--nproc_per_node=2", f"--master_port={port}", "--master_addr=127.0.0.1",
                     str(WORKER), str(spec)]]
        envs = [env]
    elif style == "torchrun2":
        commands = [[TORCHRUN_SHIM, "--nproc_per_node=1", "--nnodes=2", f"--node_rank={node}",
                     "--master_addr=127.0.0.1",
                     f"--master_port={port}", str(WORKER), str(spec)] for node in range(2)]
        envs = [env, env]
    elif style == "platform":
        commands = [[sys.executable, str(WORKER), str(spec)] for _ in range(2)]
        envs = [{**env, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)} for r in range(2)]
    else:
        raise ValueError(style)
    logs = [workdir / f"{style}_{i}_{spec.stem}.log" for i in range(len(commands))]
    started = time.monotonic()
    procs = []
    for command, proc_env, log in zip(commands, envs, logs, strict=True):
        with log.open("w") as handle:
            procs.append(subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=proc_env,
                                          cwd=workdir))
    ended: list[float | None] = [None] * len(procs)
    while time.monotonic() - started < timeout and None in ended:
        for i, proc in enumerate(procs):
            if ended[i] is None and proc.poll() is not None:
                ended[i] = time.time()
        time.sleep(0.05)
    timed_out = None in ended
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Launch(codes=[p.returncode if e is not None else None for p, e in zip(procs, ended, strict=True)],
                  logs=[log.read_text() for log in logs], seconds=time.monotonic() - started, timed_out=timed_out,
                  ended=ended)


def losses(out: Path) -> dict[int, float]:
    """``step -> loss`` of a run's metrics.jsonl."""
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {row["step"]: row["loss"] for row in rows}
