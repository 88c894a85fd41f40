"""Like ``_worker.py`` (several runs in one torchrun launch), but every rank also records what the run built and
how it started, for the tests of the ../shared/FLAGS_EXTENDED.md distributed flags.

SPEC.json: ``{"runs": [{"name", "training", "model"?, "perturb_rank1"?}], "results": dir, "keep_metrics"?:
{run name: path}}``; each rank writes
``<dir>/rank<r>.json`` with, per run: the wrapper, the DDP options it holds, its comm hooks, the FSDP units in
forward order (class, reshard after forward, explicit prefetch targets), a digest of the parameters and of the
torch RNG state when training starts, and torch._dynamo's optimize_ddp during and after the run.
``perturb_rank1``: rank 1 adds 1 to its first parameter before wrapping (what DDP's init sync must undo);
``keep_metrics``: copies a run's metrics.jsonl when it ends (before a later run resuming in its directory).
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from _det_model import NAME, SPEC  # next to this script: on sys.path when run as a script
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor

from embodied_core import hookimpl, registry
from embodied_core.trainer.api import Trainer


def _digest(tensor: torch.Tensor) -> float:
    return float(tensor.double().flatten().mul(torch.arange(1, tensor.numel() + 1, dtype=torch.float64)).sum())


def _fsdp_units(model: Any) -> list[dict[str, Any]]:
    units = [(n, m) for n, m in model.named_modules() if n and isinstance(m, FSDPModule)
             and not isinstance(m, torch.nn.LayerNorm)]
    index = {id(fully_shard.state(m)): n for n, m in units}
    out = []
    for name, module in units:
        state = fully_shard.state(module)
        group = state._fsdp_param_group
        cls = next(c for c in type(module).__mro__ if not issubclass(c, FSDPModule))  # FSDP2's class wraps it
        out.append({"name": name, "class": cls.__name__,
                    "reshards": group is not None and group.post_forward_mesh_info is not None,
                    "forward_prefetch": [index.get(id(s)) for s in state._states_to_forward_prefetch],
                    "backward_prefetch": [index.get(id(s)) for s in state._states_to_backward_prefetch]})
    return out


class Probe:
    """Records, when training starts, what the strategy built (a hook plugin bound to its trainer)."""

    def __init__(self) -> None:
        self.trainer: Any = None
        self.record: dict[str, Any] = {}

    @hookimpl
    def on_train_start(self, config: Any, model: Any, output_dir: str, start_step: int) -> None:
        wrapped = self.trainer.model
        params = [p.full_tensor() if isinstance(p, DTensor) else p for p in model.parameters()]
        dynamo = sys.modules.get("torch._dynamo")
        self.record.update(
            wrapper=type(wrapped).__name__, param_digest=sum(_digest(p.detach()) for p in params),
            rng_digest=_digest(torch.get_rng_state().float()),
            optimize_ddp=dynamo.config.optimize_ddp if dynamo else None,
            ddp={key: getattr(wrapped, key, None) for key in ("forward_sync_buffers", "batched_grad_copy",
                                                                 "skip_all_reduce_unused_params")},
            comm_hooks=[getattr(h, "__name__", str(h)) for h, *_ in getattr(wrapped, "_comm_hooks", [])],
            fsdp_units=_fsdp_units(model) if isinstance(model, FSDPModule) else [])


def _perturb_rank1(trainer: Any) -> None:
    distribute = trainer.distribute_model

    def perturbed(model: Any, **kwargs: Any) -> Any:
        if dist.get_rank() == 1:
            with torch.no_grad():
                next(model.parameters()).add_(1.0)
        return distribute(model, **kwargs)

    trainer.distribute_model = perturbed


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")  # the tests read rank 0's log lines
    registry.register("embodied.models", NAME, SPEC)
    dist.init_process_group("gloo")
    results = {}
    try:
        for run in spec["runs"]:
            probe = Probe()
            trainer = Trainer({"training": run["training"], "model": run.get("model", {})}, plugins=[probe]).build()
            probe.trainer = trainer
            if run.get("perturb_rank1"):
                _perturb_rank1(trainer)
            trainer.train()
            dynamo = sys.modules.get("torch._dynamo")
            after = dynamo.config.optimize_ddp if dynamo else None
            results[run["name"]] = {**probe.record, "optimize_ddp_after": after}
            keep = spec.get("keep_metrics", {}).get(run["name"])
            if keep and dist.get_rank() == 0:  # a later run of the launch may rewrite this run's metrics.jsonl
                shutil.copyfile(Path(run["training"]["output_dir"]) / "metrics.jsonl", keep)
        out = Path(spec["results"])
        out.mkdir(parents=True, exist_ok=True)
        (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(results, indent=2))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
