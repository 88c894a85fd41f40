"""Two processes (torchrun, gloo): a loss spike on one rank does not make the ranks diverge.

The skip decision of an update is global: the update is skipped only when no rank has a good micro-batch, so a
rank whose own micro-batch spiked still applies the all-reduced gradients of the others (its own contribute
zero) and every rank keeps the same parameters.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dist._launch import metrics, torchrun, training

pytestmark = [pytest.mark.distributed, pytest.mark.slow]


def test_a_spike_on_one_rank_keeps_the_ranks_identical(tmp_path: Path) -> None:
    out = tmp_path / "spike"
    run = {"name": "spike", "spike": {"rank": 1, "step": 2},
           "training": training(out, distributed_strategy="ddp", train_iters=3, loss_spike_threshold=50.0,
                                loss_log_rank=[-1, 0, 1])}
    results = torchrun([run], tmp_path, nproc=2)
    digests = results["spike"]["param_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    by_step = {row["step"]: row for row in metrics(out)}
    # the spike happened, on rank 1 only: its one micro-batch did not count (no loss), rank 0's did
    assert by_step[2]["loss/rank1"] is None and by_step[2]["loss/rank0"] < 50.0
    assert by_step[3]["skipped_updates"] == 0  # rank 0 applied every update, as rank 1 did
