"""The distributed flags of ../shared/FLAGS_EXTENDED.md on 2 gloo processes, one torchrun launch, each checked
for its effect: DDP keyword flags, comm hooks (bf16_compress_hook parity within bf16 tolerance), dynamo's
optimize_ddp, FSDP reshard overrides and explicit prefetch (read back from the units), activation checkpointing
inside FSDP units (same losses, units still found), --set-seed-by-rank (identical init, distinct random streams,
exact resume)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.dist._launch import MODEL, free_port, losses, training
from tests.support import clean_env, run_torchrun

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

WORKER = Path(__file__).resolve().parent / "_probe_worker.py"
UNITS = "Conv2d,Linear"  # tiny_flow_det: 3 convolutions and 3 head layers, in forward order


def _runs(tmp: Path) -> list[dict[str, Any]]:
    ddp, fsdp = {"distributed_strategy": "ddp"}, {"distributed_strategy": "fsdp"}
    flow = {"model_name": "tiny_flow_policy", "train_iters": 4, "save_interval": 2}  # noise from the global RNG
    return [
        {"name": "ddp", "perturb_rank1": True, "training": training(tmp / "ddp", **ddp, **flow)},
        {"name": "ddp_bf16_hook", "training": training(
            tmp / "ddp_bf16_hook", **ddp, **flow, ddp_comm_hook="bf16_compress_hook", ddp_comm_hook_logging=True)},
        {"name": "ddp_keywords", "perturb_rank1": True, "training": training(
            tmp / "ddp_keywords", **ddp, ddp_broadcast_buffers=False, ddp_init_sync=False,
            ddp_batched_grad_copy=True, ddp_skip_all_reduce_unused_params=True, ddp_bucket_cap_mb_list=[1, 2],
            dynamo_optimize_ddp=False)},
        {"name": "fsdp", "training": training(tmp / "fsdp", **fsdp, fsdp_wrap_modules=UNITS)},
        {"name": "fsdp_tuned", "training": training(
            tmp / "fsdp_tuned", **fsdp, fsdp_wrap_modules=UNITS, fsdp_reshard_module_overrides="Conv2d=false",
            fsdp_forward_prefetch_distance=2, fsdp_backward_prefetch_distance=1,
            activation_checkpoint_module_patterns="encoder.net.0,encoder.net.2,encoder.net.4,head.0,head.2,head.4")},
        {"name": "seed_by_rank", "training": training(tmp / "seed_by_rank", **ddp, **flow, set_seed_by_rank=True)},
        # runs go in order in one launch: this one resumes from the checkpoint the previous run wrote
        {"name": "seed_by_rank_resumed", "training": training(
            tmp / "seed_by_rank", **ddp, **flow, set_seed_by_rank=True,
            resume_from=str(tmp / "seed_by_rank/checkpoints/step_2"))},
    ]


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]], str, list[float]]:
    tmp = tmp_path_factory.mktemp("flags")
    spec, out = tmp / "spec.json", tmp / "results"
    spec.write_text(json.dumps({"runs": [{"model": MODEL, **run} for run in _runs(tmp)], "results": str(out),
                                "keep_metrics": {"seed_by_rank": str(tmp / "seed_by_rank_uninterrupted.jsonl")}}))
    proc = run_torchrun("--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={free_port()}",
                        str(WORKER), str(spec), env=clean_env(OMP_NUM_THREADS="1"), cwd=tmp, timeout=420)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-8000:]
    records = [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    kept = (tmp / "seed_by_rank_uninterrupted.jsonl").read_text().splitlines()
    return tmp, records, log, [json.loads(line)["loss"] for line in kept]


def test_bf16_compress_hook_matches_within_bf16_tolerance(launched: tuple) -> None:
    tmp, records, log, _ = launched
    plain, hooked = losses(tmp / "ddp"), losses(tmp / "ddp_bf16_hook")
    assert hooked[0] == plain[0]  # before any update
    assert hooked == pytest.approx(plain, rel=2e-2) and hooked != plain  # the gradients did travel in bf16
    assert records[0]["ddp_bf16_hook"]["comm_hooks"] == records[1]["ddp_bf16_hook"]["comm_hooks"] == ["comm_hook"]
    assert records[0]["ddp"]["comm_hooks"] == []
    assert "--ddp-comm-hook bf16_compress_hook registered" in log
    assert "--ddp-comm-hook bf16_compress_hook: bucket 0," in log and "all-reduced as torch.bfloat16" in log


def test_ddp_keyword_flags_reach_ddp(launched: tuple) -> None:
    _, records, _, _ = launched
    on, off = records[0]["ddp"]["ddp"], records[0]["ddp_keywords"]["ddp"]
    assert on == {"forward_sync_buffers": True, "batched_grad_copy": False, "skip_all_reduce_unused_params": False}
    assert off == {"forward_sync_buffers": False, "batched_grad_copy": True, "skip_all_reduce_unused_params": True}


def test_init_sync_broadcasts_rank0s_parameters_unless_turned_off(launched: tuple) -> None:
    _, records, _, _ = launched
    synced = [records[r]["ddp"]["param_digest"] for r in (0, 1)]
    unsynced = [records[r]["ddp_keywords"]["param_digest"] for r in (0, 1)]
    assert synced[0] == synced[1]  # rank 1's perturbation was overwritten by rank 0's parameters
    assert unsynced[0] != unsynced[1]


def test_dynamo_optimize_ddp_is_set_for_the_run_and_restored(launched: tuple) -> None:
    _, records, _, _ = launched
    assert records[0]["ddp_keywords"]["optimize_ddp"] is False
    assert records[0]["ddp_keywords"]["optimize_ddp_after"] is True


def test_fsdp_reshard_overrides_and_explicit_prefetch_are_set_on_the_units(launched: tuple) -> None:
    _, records, _, _ = launched
    units = records[0]["fsdp_tuned"]["fsdp_units"]
    names = [u["name"] for u in units]
    assert names == ["encoder.net.0", "encoder.net.2", "encoder.net.4", "head.0", "head.2", "head.4"]
    assert [u["reshards"] for u in units] == [False, False, False, True, True, True]
    assert [u["forward_prefetch"] for u in units] == [names[i + 1:i + 3] for i in range(6)]
    assert [u["backward_prefetch"] for u in units] == [[]] + [[names[i - 1]] for i in range(1, 6)]
    default = records[0]["fsdp"]["fsdp_units"]
    assert [u["name"] for u in default] == names  # checkpointed modules are still found as FSDP units
    assert all(u["reshards"] and not u["forward_prefetch"] and not u["backward_prefetch"] for u in default)


def test_activation_checkpointing_and_prefetch_inside_fsdp_leave_the_losses_unchanged(launched: tuple) -> None:
    tmp, _, log, _ = launched
    assert losses(tmp / "fsdp_tuned") == pytest.approx(losses(tmp / "fsdp"), rel=1e-6, abs=1e-7)
    assert "activation checkpointing (non-reentrant) on 6 module(s)" in log


def test_set_seed_by_rank_keeps_the_init_and_separates_the_random_streams(launched: tuple) -> None:
    tmp, records, _, _ = launched
    same = [records[r]["ddp"] for r in (0, 1)]
    by_rank = [records[r]["seed_by_rank"] for r in (0, 1)]
    assert same[0]["rng_digest"] == same[1]["rng_digest"]
    assert by_rank[0]["rng_digest"] != by_rank[1]["rng_digest"]
    assert by_rank[0]["param_digest"] == by_rank[1]["param_digest"] == same[0]["param_digest"]
    assert losses(tmp / "seed_by_rank")[0] != losses(tmp / "ddp")[0]  # rank 1 drew other flow-matching noise


def test_set_seed_by_rank_resumes_exactly(launched: tuple) -> None:
    tmp, _, _, uninterrupted = launched
    # the resumed run (from step 2) rewrote steps 3-4 of the same metrics.jsonl: bit for bit the same losses
    assert len(uninterrupted) == 4 and losses(tmp / "seed_by_rank") == uninterrupted
