"""The same ``embodied train`` command under torchrun: trains, and only rank 0 prints progress."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dist._launch import free_port
from tests.support import clean_env, run_torchrun

pytestmark = [pytest.mark.distributed, pytest.mark.slow]


@pytest.mark.timeout(240)
def test_cli_under_torchrun_logs_on_rank0_only(tmp_path: Path) -> None:
    command = ["--nproc_per_node=2", f"--master_port={free_port()}", "-m", "embodied_core.cli.main", "train",
               "--model-name", "tiny_flow_policy",
               "--dataset-format", "dummy_datasets", "--dtype", "float32", "--num-workers", "0",
               "--train-iters", "2", "--lr-warmup-iters", "1", "--save-interval", "2", "--save-format", "dcp",
               "--distributed-strategy", "fsdp", "--output-dir", str(tmp_path)]
    result = run_torchrun(*command, env=clean_env(OMP_NUM_THREADS="1"), timeout=200)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "[rank0] INFO embodied.train: step 2/2" in output
    assert "[rank1] INFO" not in output
    assert sorted(p.name for p in (tmp_path / "checkpoints/step_2/dcp").glob("*.distcp")) == [
        "__0_0.distcp", "__1_0.distcp"]
