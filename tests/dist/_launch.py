"""Launch helpers of the distributed tests: free ports, torchrun with hard timeouts, reference runs."""

from __future__ import annotations

import json
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from embodied_core import registry
from embodied_core.trainer.api import Trainer
from tests.dist._det_model import NAME, SPEC
from tests.support import clean_env, run_torchrun

WORKER = Path(__file__).resolve().parent / "_worker.py"


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def training(out: Path, **extra: Any) -> dict[str, Any]:
    """Flags shared by every distributed test run: tiny model, dummy data, fp32, no workers."""
    base = {"model_name": NAME, "dataset_format": "dummy_datasets", "num_samples": 64, "dtype": "float32",
            "num_workers": 0, "per_device_batch_size": 4, "train_iters": 3, "lr_base": 1e-3,
            "lr_warmup_iters": 1, "lr_decay_iters": 4, "clip_grad": 0.1, "save_interval": 0, "seed": 5,
            "log_interval": 1, "output_dir": str(out), "detail_log_interval": 0}
    return {**base, **extra}


MODEL = {"hidden_dim": 64, "conv_channels": [8, 8, 8]}


def metrics(out: Path) -> list[dict[str, Any]]:
    """Rows of ``metrics.jsonl``."""
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def losses(out: Path) -> list[float]:
    """Logged loss of every step."""
    return [row["loss"] for row in metrics(out)]


def run_single(train: dict[str, Any]) -> None:
    """A reference run in this process (WORLD_SIZE unset: unwrapped)."""
    registry.register("embodied.models", NAME, SPEC, replace=True)
    Trainer({"training": train, "model": MODEL}).train()


def torchrun(runs: list[dict[str, Any]], workdir: Path, *, nproc: int, timeout: float = 240,
             nnodes: int = 1) -> dict[str, Any]:
    """Trains ``runs`` (``{"name", "training"}``) in one launch of ``nproc`` processes per node.

    With ``nnodes > 1`` it starts one torchrun per node on this machine (static rendezvous on localhost),
    as a multi-node job would. Every launch has a hard timeout, so a hung collective fails the test.
    """
    spec = workdir / "spec.json"
    results = workdir / "results.json"
    spec.write_text(json.dumps({"runs": [{"model": MODEL, **run} for run in runs], "results": str(results)}))
    port = free_port()
    env = clean_env(OMP_NUM_THREADS="1")

    def node(rank: int) -> subprocess.CompletedProcess[str]:
        return run_torchrun(f"--nproc_per_node={nproc}", f"--nnodes={nnodes}", f"--node_rank={rank}",
                            "--master_addr=127.0.0.1", f"--master_port={port}", str(WORKER), str(spec),
                            env=env, cwd=workdir, timeout=timeout, log=workdir / f"node{rank}.log")

    with ThreadPoolExecutor(nnodes) as pool:  # the nodes' agents run at once (they rendezvous with each other)
        done = list(pool.map(node, range(nnodes)))
    if any(result.returncode for result in done):
        raise AssertionError(f"torchrun failed with {[r.returncode for r in done]}:\n{_tail(workdir, nnodes)}")
    return json.loads(results.read_text())


def _tail(workdir: Path, nnodes: int) -> str:
    return "\n".join((workdir / f"node{n}.log").read_text()[-6000:] for n in range(nnodes))
