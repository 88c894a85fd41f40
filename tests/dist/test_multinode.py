"""Four processes launched as two nodes on localhost (two ``torchrun --nnodes 2 --node_rank {0,1}``
with two processes each): HSDP with ``--hsdp-shard-size auto`` (= processes per node), an explicit 2x2
HSDP with gradient accumulation, and 1-D FSDP resharding to groups of 2 after forward."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dist._launch import losses, metrics, run_single, torchrun, training

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

RUNS = {
    "hsdp_auto": ({"distributed_strategy": "fsdp", "hsdp_shard_size": "auto"}, "ref", [2, 2]),
    "hsdp_2x2_ga": ({"distributed_strategy": "fsdp", "hsdp_shard_size": 2, "gradient_accumulation_steps": 2,
                     "per_device_batch_size": 2}, "ref", [2, 2]),
    "fsdp_reshard_2": ({"distributed_strategy": "fsdp", "fsdp_reshard_default": 2}, "ref", [4]),
}


@pytest.fixture(scope="module")
def multinode(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("multinode")
    runs = [{"name": name, "training": training(root / name, **flags)} for name, (flags, _, _) in RUNS.items()]
    info = torchrun(runs, root, nproc=2, nnodes=2, timeout=300)
    run_single(training(root / "ref", per_device_batch_size=16))
    return root, info


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", list(RUNS))
def test_two_nodes_match_one_process(multinode: tuple[Path, dict], name: str) -> None:
    root, info = multinode
    _, reference, mesh = RUNS[name]
    assert info[name]["mesh"] == mesh
    assert losses(root / name) == pytest.approx(losses(root / reference), abs=1e-5, rel=0)
    # the replicate axis must not be summed into the norm: equal to the one-process norm, not sqrt(2) x
    assert [r["grad_norm"] for r in metrics(root / name)] == pytest.approx(
        [r["grad_norm"] for r in metrics(root / reference)], rel=1e-4)
