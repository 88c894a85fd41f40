"""pi05_tiny on two gloo processes through the real CLI: DDP and FSDP2 (joint layers as units) agree.

Each launch runs under a subprocess timeout, so a hung collective fails the test instead of the suite.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.support import clean_env, run_torchrun

pytestmark = [pytest.mark.distributed, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _launch(output_dir: Path, strategy: str) -> list[dict]:
    args = ["--nproc_per_node", "2", "--master_port", str(_free_port()), "-m", "embodied_core.cli.main", "train",
            "--model-name", "pi05_tiny", "--dataset-format", "dummy_datasets", "--num-samples", "16",
            "--train-iters", "2", "--per-device-batch-size", "2", "--num-workers", "0", "--dtype", "float32",
            "--lr-warmup-iters", "0", "--save-interval", "0", "--output-dir", str(output_dir),
            "--distributed-strategy", strategy]
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    result = run_torchrun(*args, env=clean_env(OMP_NUM_THREADS="1"), timeout=240, log=output_dir.with_suffix(".log"))
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def ddp(tmp_path_factory) -> list[dict]:
    rows = _launch(tmp_path_factory.mktemp("pi05_ddp") / "ddp", "ddp")
    assert [r["step"] for r in rows] == [1, 2]
    return rows


@pytest.mark.timeout(600)
def test_fsdp_gives_the_losses_of_ddp(ddp, tmp_path):
    fsdp = _launch(tmp_path / "fsdp", "fsdp")
    for a, b in zip(ddp, fsdp, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
