"""One rank of a 2-process gloo job fails: killed (SIGKILL) with an all-reduce in flight (ranks started by a
platform launcher) or inside DCP's checkpoint write (torchrun as two nodes), or its data loader raises (torchrun on
one node). The survivor exits non-zero at once with a message naming the rank, nothing hangs, ``--resume`` then
continues from the last complete checkpoint with the losses of an uninterrupted run (bit for bit), and a loader
error stops every rank with that same error. Three launches in all; the mid-forward kill and the death of the rank
hosting the store are in ``python -m tests.reliability.campaign``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reliability.dist_cases import Launch, launch, losses, training

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

after_kill: dict[str, object] = {}  # the DCP run's checkpoints right after the kill (before the resume)
BOUND_S = 120  # a launch here takes 15-25 s on 2 loaded cores; a hang would run into the launch timeout (180 s)


# One launch per fixture, so that no test's set-up spans two launches.
@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dist_faults")


@pytest.fixture(scope="module")
def allreduce_job(root: Path) -> tuple[Path, Launch]:
    killed = training(root / "killed_allreduce")
    return root / "killed_allreduce", launch(root, [killed], style="platform",
                                             fault={"kind": "kill_allreduce", "rank": 1, "step": 3})


@pytest.fixture(scope="module")
def dcp_job(root: Path) -> tuple[Path, Launch]:
    dcp = training(root / "killed_dcp", save_format="dcp")
    job = launch(root, [dcp], style="torchrun2", fault={"kind": "kill_dcp_save", "rank": 1, "step": 4})
    checkpoints = root / "killed_dcp" / "checkpoints"
    after_kill["latest"] = (checkpoints / "latest").resolve().name
    after_kill["partial"] = sorted(p.name for p in checkpoints.iterdir() if p.name.startswith(".tmp-"))
    return root / "killed_dcp", job


@pytest.fixture(scope="module")
def resume_job(root: Path, allreduce_job, dcp_job) -> tuple[Path, Launch]:
    """One launch for the rest: both resumes, the uninterrupted reference, then a run whose loader fails on rank 1."""
    runs = [{**training(root / "killed_allreduce"), "resume": True},
            {**training(root / "killed_dcp", save_format="dcp"), "resume": True},
            training(root / "straight"), training(root / "loader")]
    return root / "straight", launch(root, runs, style="torchrun1",
                                     fault={"kind": "loader", "rank": 1, "step": 3, "run": 3})


def _survivor_message(job: Launch, log: int) -> str:
    lines = [line for line in job.logs[log].splitlines() if "failed:" in line and "embodied" in line]
    assert lines, job.text[-4000:]
    return lines[-1]


@pytest.mark.timeout(900)
def test_a_rank_killed_with_an_all_reduce_in_flight_is_named_by_the_survivor(allreduce_job):
    _, job = allreduce_job
    assert not job.timed_out and job.seconds < BOUND_S, job.text[-4000:]
    assert job.codes == [1, -9], job.text[-4000:]  # rank 0 exits 1 on its own; rank 1 was killed
    message = _survivor_message(job, 0)
    assert "rank 1 stopped responding" in message and "rank 0 was in a collective" in message, message
    assert job.seconds_after_kill(0) < 30, job.text[-3000:]  # gloo sees the closed connection, heartbeats ~3 s
    assert "Traceback" not in job.logs[0]


@pytest.mark.timeout(900)
def test_a_rank_killed_inside_the_dcp_save_leaves_the_previous_checkpoint_as_latest(dcp_job):
    _, job = dcp_job
    assert not job.timed_out and job.seconds < BOUND_S, job.text[-4000:]
    assert job.codes[0] == 1 and job.codes[1] != 0, job.text[-4000:]  # node 0's agent: its rank exited 1
    assert "rank 1 stopped responding" in _survivor_message(job, 0)
    assert after_kill == {"latest": "step_2", "partial": [".tmp-step_4"]}  # the half-written save is never latest


@pytest.mark.timeout(900)
def test_resume_after_the_kills_continues_from_the_last_complete_checkpoint_exactly(resume_job, allreduce_job,
                                                                                    dcp_job):
    straight, job = resume_job
    assert not job.timed_out, job.text[-4000:]
    reference = losses(straight)
    assert sorted(reference) == [1, 2, 3, 4, 5, 6]
    for name, (out, _) in (("allreduce", allreduce_job), ("dcp", dcp_job)):
        assert losses(out) == reference, name  # steps 1-2 before the kill, 3-6 after the resume: bit for bit
        summary = json.loads((out / "summary.json").read_text())
        assert summary["resumed_from"].endswith("step_2"), summary
        assert not [p for p in (out / "checkpoints").iterdir() if p.name.startswith(".tmp-")]  # partial step_4 gone


@pytest.mark.timeout(900)
def test_a_loader_error_on_one_rank_stops_every_rank_with_that_error(resume_job):
    _, job = resume_job
    assert not job.timed_out and job.seconds < BOUND_S, job.text[-4000:]
    assert job.codes != [0], job.text[-4000:]
    error = "rank 1 failed: DataError: sample 24: the frame cannot be decoded (injected fault)"
    assert f"embodied: failed: {error}; every other rank stops with it" in job.text, job.text[-4000:]
    assert f"embodied: failed: {error}; rank 0 stops too" in job.text, job.text[-4000:]
