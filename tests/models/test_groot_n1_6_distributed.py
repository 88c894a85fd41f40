"""groot_n1_6_tiny on two gloo processes through the real CLI: FSDP2 (DiT blocks, language decoder layers and vision
encoder layers as units) gives the losses and gradient norms of one process with the whole batch. The training
draws are keyed per sample (``embodied_models.groot.draws``), so they do not depend on the world size; model dropout
(torch's RNG) is switched off for the comparison. One launch, under a subprocess timeout."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch

from embodied_core import Trainer
from tests.support import clean_env, run_torchrun

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

COMMON = {"model_name": "groot_n1_6_tiny", "dataset_format": "dummy_datasets", "num_samples": 16, "train_iters": 2,
          "num_workers": 0, "dtype": "float32", "lr_warmup_iters": 0, "lr_base": 1e-3, "save_interval": 0}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _flags() -> list[str]:
    return [f"--{k.replace('_', '-')}={v}" for k, v in COMMON.items()]


def _launch(output_dir: Path) -> list[dict]:
    """Two gloo ranks with half the batch each, FSDP2 over the model's declared units."""
    args = ["--nproc_per_node", "2", "--master_port", str(_free_port()), "-m", "embodied_core.cli.main", "train",
            *_flags(), "--per-device-batch-size", "2", "--output-dir", str(output_dir), "--distributed-strategy",
            "fsdp", "model.dropout=0.0"]
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    result = run_torchrun(*args, env=clean_env(OMP_NUM_THREADS="1"), timeout=240, log=output_dir.with_suffix(".log"))
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]


def _single_process(output_dir: Path) -> list[dict]:
    """The same run in this process with the whole batch (one thread, as the launched ranks)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        Trainer({"training": {**COMMON, "per_device_batch_size": 4, "output_dir": str(output_dir)},
                 "model": {"dropout": 0.0}}).train()
    finally:
        torch.set_num_threads(threads)
    return [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return _single_process(tmp_path_factory.mktemp("groot_n1_6_single") / "single")


@pytest.mark.timeout(600)
def test_two_fsdp_processes_give_the_losses_of_one_process(single: list[dict], tmp_path: Path) -> None:
    launched = _launch(tmp_path / "fsdp")
    assert [r["step"] for r in single] == [r["step"] for r in launched] == [1, 2]
    for one, other in zip(single, launched, strict=True):
        assert other["loss"] == pytest.approx(one["loss"], rel=1e-5)
        assert other["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-4)
