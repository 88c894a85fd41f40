"""``allreduce``: data parallelism without a wrapper module: parameters broadcast from rank 0 once, gradients
averaged with ``all_reduce`` after the backward of each synchronizing micro-batch (gloo on CPU, NCCL on CUDA)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch import nn

from embodied_core.config.training_args import TrainingArgs
from embodied_core.strategies.base import DistributedStrategy

__all__ = ["AllReduceStrategy", "build_allreduce"]


class AllReduceStrategy(DistributedStrategy):
    """Every rank keeps a full replica; only gradients travel."""

    def __init__(self, args: TrainingArgs) -> None:
        super().__init__(args)
        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))

    def setup(self) -> None:
        cuda = torch.cuda.is_available()
        self.device = torch.device("cuda", self.local_rank) if cuda else torch.device("cpu")
        dist.init_process_group(backend="nccl" if cuda else "gloo")

    def close(self) -> None:
        super().close()
        if dist.is_initialized():
            dist.destroy_process_group()

    def barrier(self) -> None:
        dist.barrier()

    def wrap_model(self, model: nn.Module) -> nn.Module:
        model = model.to(self.device)
        with torch.no_grad():
            for tensor in [*model.parameters(), *model.buffers()]:
                dist.broadcast(tensor, src=0)
        return model

    @contextlib.contextmanager
    def grad_sync(self, model: nn.Module, *, sync: bool) -> Iterator[None]:
        yield
        if sync:
            for param in model.parameters():
                if param.grad is not None:
                    dist.all_reduce(param.grad)
                    param.grad.div_(self.world_size)

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        total = tensor.detach().clone()
        dist.all_reduce(total)
        return total / self.world_size

    def all_gather_scalars(self, tensor: torch.Tensor) -> torch.Tensor:
        gathered = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(gathered, tensor.contiguous())
        return torch.stack(gathered)


def build_allreduce(args: TrainingArgs) -> AllReduceStrategy:
    """Factory named by the ``allreduce`` spec."""
    return AllReduceStrategy(args)
