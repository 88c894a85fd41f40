"""GPU check of embodied-dist (driver of gpu_dist_check.sh; run under torchrun).

Phases (``--phase``):
- ``reference``: one process trains the parity configuration (same global batch) and writes its losses.
- ``main``: every process trains DDP, ZeRO-1 and FSDP2 on NCCL (parity vs the reference when there are 2+
  GPUs; with one GPU these runs are single-process and check determinism only), FSDP2 once per reshard
  policy on a wider model in bf16 (peak CUDA memory per policy; 2+ GPUs), and a DCP save sync vs async
  (how long training is blocked). Prints one JSON report on rank 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from _det_model import NAME, SPEC  # next to this script (on sys.path); per-sample noise: parity is well defined

from embodied_core import registry
from embodied_core.trainer.api import Trainer

PARITY = {"model_name": NAME, "dataset_format": "dummy_datasets", "num_samples": 512, "dtype": "float32",
          "num_workers": 0, "train_iters": 10, "lr_base": 1e-3, "lr_warmup_iters": 2, "lr_decay_iters": 10,
          "clip_grad": 0.1, "save_interval": 0, "seed": 5, "log_interval": 1, "detail_log_interval": 0}
GLOBAL_BATCH = 16
WIDE = {"hidden_dim": 4096}


def _losses(out: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def _train(out: Path, training: dict, model: dict | None = None) -> tuple[list[float], float]:
    cuda = torch.cuda.is_available()  # False only when smoke-testing this script on CPU (gloo)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    Trainer({"training": {**PARITY, **training, "output_dir": str(out)}, "model": model or {}}).train()
    peak_gib = torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0
    return (_losses(out) if (out / "metrics.jsonl").exists() else []), peak_gib


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", choices=("reference", "main"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    cli = parser.parse_args()
    registry.register("embodied.models", NAME, SPEC)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if cli.phase == "reference":
        losses, _ = _train(cli.out / "reference", {"per_device_batch_size": GLOBAL_BATCH})
        (cli.out / "reference.json").write_text(json.dumps(losses))
        return 0
    if world > 1 and torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl")
    elif world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (smoke test)"
    report: dict = {"world_size": world, "device": device, "parity": {}, "reshard": {},
                    "save": {}}
    reference = json.loads((cli.out / "reference.json").read_text())
    per_device = GLOBAL_BATCH // world
    for name, flags in {"ddp": {"distributed_strategy": "ddp"},
                        "zero1": {"distributed_strategy": "ddp", "zero_optimizer": True},
                        "fsdp": {"distributed_strategy": "fsdp"}}.items():
        losses, _ = _train(cli.out / name, {**flags, "per_device_batch_size": per_device})
        if rank == 0:
            report["parity"][name] = max(abs(a - b) for a, b in zip(losses, reference, strict=True))
    # One process runs unwrapped: reshard policies need 2+ GPUs (NCCL refuses two ranks on one GPU).
    policies = {} if world == 1 else {"true": True, "false": False} | ({"2": 2} if world >= 4 else {})
    for label, policy in policies.items():
        _, peak = _train(cli.out / f"reshard_{label}", {"distributed_strategy": "fsdp", "dtype": "bfloat16",
                                                          "per_device_batch_size": 64, "train_iters": 3,
                                                          "fsdp_reshard_default": policy, "fsdp_min_num_params": 1},
                         WIDE)
        report["reshard"][label] = round(peak, 3)
    for label, asynchronous in (("sync", False), ("async", True)):
        out = cli.out / f"save_{label}"
        _train(out, {"distributed_strategy": "fsdp", "per_device_batch_size": per_device, "train_iters": 6,
                     "save_interval": 3, "save_format": "dcp", "async_save": asynchronous}, WIDE)
        if rank == 0:
            meta = json.loads((out / "checkpoints" / "step_3" / "meta.json").read_text())
            report["save"][label] = {"blocking_s": meta["blocking_seconds"], "total_s": meta["save_seconds"]}
    if rank == 0:
        print("GPU_DIST_REPORT " + json.dumps(report))
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
