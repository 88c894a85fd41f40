"""Memory of gradient accumulation under FSDP2: reduce-scatter every micro-batch vs only the last.

Runs an MLP (``--params-m`` million parameters, one FSDP unit per layer) on ``--nproc`` CPU processes
(gloo) through ``embodied_dist``'s FSDP strategy, once with ``--fsdp-reduce-every-microbatch`` (default)
and once without, and prints per mode, on rank 0:

- gradient bytes alive between micro-batches (all live tensors minus those alive before the step),
- peak resident memory of the process,
- time per optimizer step (CPU, for the relative cost of the extra reduce-scatters only).

Reducing only on the last micro-batch keeps every unit's unsharded fp32 gradient until the end of the
accumulation (about 4 bytes x parameters), while reducing every micro-batch keeps only the 1/N shard.

    python benchmarks/fsdp_ga_memory.py --params-m 32 --ga 4 --nproc 2
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import socket
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.multiprocessing as mp
from torch import nn


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _live_tensor_bytes() -> int:
    """Bytes of every distinct tensor storage reachable by the garbage collector (local shards only)."""
    seen: set[int] = set()
    total = 0
    with warnings.catch_warnings():  # isinstance on some lazily imported module objects warns
        warnings.simplefilter("ignore")
        objects = [obj for obj in gc.get_objects() if isinstance(obj, torch.Tensor)]
    for obj in objects:
        try:
            tensor = obj.to_local() if hasattr(obj, "to_local") else obj
            storage = tensor.untyped_storage()
        except (RuntimeError, ReferenceError):
            continue
        if storage.data_ptr() and storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


def _mlp(params_m: float, depth: int) -> nn.Sequential:
    width = int((params_m * 1e6 / depth) ** 0.5)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers)


def _worker(rank: int, nproc: int, port: int, options: dict, out: str) -> None:
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(rank),
                       "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    from embodied_core.config.training_args import TrainingArgs
    from embodied_dist.fsdp import FSDPStrategy

    args = TrainingArgs(distributed_strategy="fsdp", dtype="float32", fsdp_min_num_params=1,
                        fsdp_reduce_every_microbatch=options["every"], gradient_accumulation_steps=options["ga"])
    strategy = FSDPStrategy(args)
    strategy.setup()
    torch.manual_seed(0)
    model = strategy.wrap_model(_mlp(options["params_m"], options["depth"]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    width = model[0].in_features
    results = []
    for step in range(options["steps"]):
        optimizer.zero_grad(set_to_none=True)
        gc.collect()
        before = _live_tensor_bytes()
        started = time.perf_counter()
        held = 0
        for micro in range(options["ga"]):
            x = torch.randn(options["batch"], width)
            with strategy.grad_sync(model, sync=micro == options["ga"] - 1):
                model(x).square().mean().backward()
            if micro == 0 and options["ga"] > 1:
                gc.collect()
                held = _live_tensor_bytes() - before
        optimizer.step()
        results.append({"step": step, "held_bytes": held, "step_s": time.perf_counter() - started})
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if rank == 0:
        num_params = sum(p.numel() for p in model.parameters())
        Path(out).write_text(json.dumps({"results": results, "peak_rss_mb": peak_mb, "params": num_params}))
    strategy.close()


def _run(options: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "result.json")
        mp.spawn(_worker, args=(options["nproc"], _free_port(), options, out), nprocs=options["nproc"], join=True)
        return json.loads(Path(out).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params-m", type=float, default=32.0, help="model size in millions of parameters")
    parser.add_argument("--depth", type=int, default=8, help="linear layers (one FSDP unit each)")
    parser.add_argument("--ga", type=int, default=4, help="gradient accumulation steps")
    parser.add_argument("--batch", type=int, default=8, help="micro-batch rows per rank")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps (the last is reported)")
    parser.add_argument("--nproc", type=int, default=2, help="processes (gloo, CPU)")
    cli = parser.parse_args()
    base = {"params_m": cli.params_m, "depth": cli.depth, "ga": cli.ga, "batch": cli.batch, "steps": cli.steps,
            "nproc": cli.nproc}
    print(f"FSDP2 on {cli.nproc} CPU processes, GA={cli.ga}, ~{cli.params_m:g}M fp32 parameters")
    print(f"{'mode':<28}{'grad MiB held after micro 1':>30}{'peak RSS MiB':>16}{'s/step':>10}")
    for every in (True, False):
        report = _run({**base, "every": every})
        last = report["results"][-1]
        mode = "reduce every micro-batch" if every else "reduce on last only"
        print(f"{mode:<28}{last['held_bytes'] / 2**20:>30.1f}{report['peak_rss_mb']:>16.0f}{last['step_s']:>10.3f}")
    params = report["params"]
    print(f"expected difference ~ (1 - 1/{cli.nproc}) x 4 bytes x {params / 1e6:.1f}M params = "
          f"{(1 - 1 / cli.nproc) * 4 * params / 2**20:.0f} MiB per rank")


if __name__ == "__main__":
    main()
