"""One rank of a 2-process training job with an injected fault (``python _fault_worker.py SPEC.json``).

SPEC.json: ``{"runs": [{"training": {...}}, ...], "model": {...}, "fault": {"kind", "rank", "step", "run"?} | null}``:
the runs train one after the other over one process group (starting processes is the cost), the fault armed in run
``run`` (default 0; the runs after a faulted one never start). Kinds, on rank
``rank`` at optimizer step ``step`` (1-based):

- ``kill_step``: SIGKILL inside the model's forward (mid-step: the other rank goes on into the gradient all-reduce);
- ``kill_allreduce``: SIGKILL with an all-reduce in flight (the metrics all-reduce of that logging step is started
  asynchronously, then the process kills itself before waiting for it);
- ``kill_dcp_save``: SIGKILL inside DCP's write of checkpoint ``step`` (the other rank is writing its shards);
- ``loader``: the data loader raises a DataError at that step.

Started by torchrun or, as a platform launcher does, with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from embodied_core import hookimpl, registry  # noqa: E402
from embodied_core.errors import DataError  # noqa: E402
from embodied_core.trainer.api import Trainer  # noqa: E402
from tests.dist._det_model import NAME, SPEC  # noqa: E402


def _die() -> None:
    import time

    print(f"injected fault: rank {os.environ['RANK']} is killed at {time.time():.3f}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


class _Faults:
    """Arms the fault when training starts (the model exists then) and counts optimizer steps."""

    def __init__(self, fault: dict[str, Any]) -> None:
        self.kind, self.rank, self.step = fault["kind"], int(fault["rank"]), int(fault["step"])
        self.done = 0  # optimizer steps completed

    @hookimpl
    def on_step_end(self, step: int, metrics: Any) -> None:
        self.done = step

    @hookimpl
    def on_train_start(self, config: Any, model: Any, output_dir: str, start_step: int) -> None:
        self.done = start_step
        if int(os.environ["RANK"]) != self.rank:
            return
        if self.kind == "kill_step":
            model.register_forward_pre_hook(lambda *_: _die() if self.done + 1 == self.step else None)
        elif self.kind == "kill_allreduce":
            real = dist.all_reduce

            def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
                if self.done + 1 == self.step:
                    real(tensor, async_op=True)  # in flight on both ranks now
                    _die()
                return real(tensor, *args, **kwargs)

            dist.all_reduce = all_reduce
        elif self.kind == "kill_dcp_save":
            from torch.distributed.checkpoint.filesystem import FileSystemWriter

            real_write = FileSystemWriter.write_data

            def write_data(writer: Any, *args: Any, **kwargs: Any) -> Any:
                if self.done == self.step:
                    _die()
                return real_write(writer, *args, **kwargs)

            FileSystemWriter.write_data = write_data  # type: ignore[method-assign]
        elif self.kind == "loader":
            from embodied_data.formats.dummy import DummyDataset

            real_item = DummyDataset.__getitem__
            batch = int(config.training.per_device_batch_size)

            def getitem(dataset: Any, index: int) -> Any:
                getitem.calls += 1  # type: ignore[attr-defined]
                if getitem.calls > (self.step - 1 - start_step) * batch:  # type: ignore[attr-defined]
                    raise DataError(f"sample {index}: the frame cannot be decoded (injected fault)")
                return real_item(dataset, index)

            getitem.calls = 0  # type: ignore[attr-defined]
            DummyDataset.__getitem__ = getitem  # type: ignore[method-assign]


def main(spec_path: str) -> int:
    from embodied_core.cli._errors import run_guarded

    spec = json.loads(Path(spec_path).read_text())
    registry.register("embodied.models", NAME, SPEC, replace=True)

    def run() -> int:
        for i, entry in enumerate(spec["runs"]):
            fault = spec.get("fault")
            plugins = (_Faults(fault),) if fault and i == int(fault.get("run", 0)) else ()
            Trainer({"training": entry["training"], "model": spec.get("model", {})}, plugins=plugins).train()
        return 0

    if len(spec["runs"]) > 1:  # the strategies reuse a group they did not create
        dist.init_process_group("gloo")
    try:
        return run_guarded("embodied train", run)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
