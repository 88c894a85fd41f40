"""``--ddp-comm-hook``: torch's DDP communication hooks, optionally logged (``--ddp-comm-hook-logging``).

``allreduce_hook`` is DDP's own averaging all-reduce written as a hook; ``fp16_compress_hook`` /
``bf16_compress_hook`` cast each gradient bucket to half precision before the all-reduce and back after it,
halving the traffic at the cost of half-precision rounding of the averaged gradients.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

__all__ = ["COMM_HOOKS", "register_comm_hook"]

logger = logging.getLogger("embodied.dist")

COMM_HOOKS: dict[str, tuple[Callable[..., Any], torch.dtype | None]] = {
    "allreduce_hook": (default_hooks.allreduce_hook, None),
    "fp16_compress_hook": (default_hooks.fp16_compress_hook, torch.float16),
    "bf16_compress_hook": (default_hooks.bf16_compress_hook, torch.bfloat16),
}
"""Hook name -> (torch's hook, the dtype gradients travel in; None: their own)."""


def _hook(name: str, *, log: bool) -> Callable[..., Any]:
    """torch's hook ``name`` behind a function of DDP's hook signature; with ``log`` it logs each bucket the first
    time it is reduced (so the log stays a handful of lines).

    DDP refuses a function *named* bf16_compress_hook on every backend but NCCL (and XCCL), although gloo
    all-reduces bfloat16 (the CPU tests use it); under another name it is accepted, and a backend that lacks
    bfloat16 then fails on the first all-reduce with its own error. The parameters carry no annotations because
    DDP compares them with ``dist.GradBucket`` itself.
    """
    hook, wire = COMM_HOOKS[name]
    seen: set[int] = set()

    def comm_hook(state, bucket):  # no annotations: see the docstring
        if log and bucket.index() not in seen:
            seen.add(bucket.index())
            grads = bucket.buffer()
            logger.info("--ddp-comm-hook %s: bucket %d, %d gradient elements of %s (%d parameters), all-reduced as "
                        "%s", name, bucket.index(), grads.numel(), grads.dtype, len(bucket.parameters()),
                        wire or grads.dtype)
        return hook(state, bucket)

    return comm_hook


def register_comm_hook(model: DistributedDataParallel, name: str, *, log: bool, is_main: bool) -> None:
    """Registers ``--ddp-comm-hook name`` on ``model`` (default process group); with ``log``, rank 0 logs it."""
    if log and is_main:
        wire = COMM_HOOKS[name][1]
        logger.info("--ddp-comm-hook %s registered: gradient buckets travel as %s and are averaged over ranks",
                    name, wire or "their own dtype")
    model.register_comm_hook(state=None, hook=_hook(name, log=log and is_main))
