"""Runs several training configurations in one torchrun launch (``python _worker.py SPEC.json``).

Starting processes dominates the cost of a distributed test on a small CPU, so one launch trains every
configuration of a test in sequence over one process group (the strategies reuse a group they did not
create). SPEC.json: ``{"runs": [{"name", "training", "model"?}], "results": path}``; rank 0 writes, per
run, what the strategy built (mesh shape, wrapper class) to ``results``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist
from _det_model import NAME, SPEC  # next to this script: on sys.path when run as a script

from embodied_core import registry
from embodied_core.trainer.api import Trainer


def _record_before_close(trainer, built: dict) -> None:
    """Records the wrapped model and optimizer while they exist (close() drops the distribution wrapper)."""
    close = trainer.close

    def record_then_close() -> None:
        built.update(wrapper=type(trainer.model).__name__, optimizer=type(trainer.optimizer).__name__,
                     param_dtypes=sorted({str(p.dtype) for p in trainer.model.parameters()}))
        close()

    trainer.close = record_then_close


def _spike(trainer, *, rank: int, step: int) -> None:
    """On ``rank`` only, multiplies the actions of update ``step``'s batch by 1e3 (a finite loss spike)."""
    if dist.get_rank() != rank:
        return
    original = trainer.forward_backward

    def forward_backward(batch, *, scale):
        if trainer.state.step + 1 == step:
            batch["action"] = batch["action"] * 1e3
        return original(batch, scale=scale)

    trainer.forward_backward = forward_backward


def _param_digest(trainer) -> str:
    """A digest of this rank's own replica of the parameters (DDP): equal digests on all ranks = no divergence."""
    import hashlib

    state = trainer.strategy.unwrap_model(trainer.model).state_dict()
    digest = hashlib.sha256()
    for key in sorted(state):
        digest.update(key.encode())
        digest.update(state[key].float().numpy().tobytes())
    return digest.hexdigest()


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    registry.register("embodied.models", NAME, SPEC)
    dist.init_process_group("gloo")
    results = {}
    try:
        for run in spec["runs"]:
            trainer = Trainer({"training": run["training"], "model": run.get("model", {})}).build()
            built: dict = {}
            _record_before_close(trainer, built)
            if "spike" in run:
                _spike(trainer, **run["spike"])
                close = trainer.close

                def digest_then_close(trainer=trainer, close=close, built=built) -> None:
                    digests = [None] * dist.get_world_size()
                    dist.all_gather_object(digests, _param_digest(trainer))
                    built["param_digests"] = digests
                    close()

                trainer.close = digest_then_close
            trainer.train()
            mesh = getattr(trainer.strategy, "mesh", None)
            results[run["name"]] = {"strategy": type(trainer.strategy).__name__,
                                    "mesh": list(mesh.shape) if mesh is not None else None, **built}
        if dist.get_rank() == 0:
            Path(spec["results"]).write_text(json.dumps(results, indent=2))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
