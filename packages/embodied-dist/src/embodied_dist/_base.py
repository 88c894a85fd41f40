"""What DDP and FSDP share: the process group, collectives for metrics, and full (gathered) state dicts.

The launch environment is checked when the strategy is built (before ``init_process_group``), so a
half-set environment fails with a message instead of hanging in the rendezvous.
"""

from __future__ import annotations

import datetime
import logging
import os
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from embodied_core.config.training_args import TrainingArgs
from embodied_core.distributed.base import DistributedStrategy
from embodied_core.distributed.validation import LaunchEnv, launch_env, launch_problems
from embodied_core.errors import RankFailureError, UsageError
from embodied_dist.faults import FaultMonitor, is_collective_failure

__all__ = ["ProcessGroupStrategy"]

logger = logging.getLogger("embodied.dist")

_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
"""Gather the whole state to rank 0, moving each tensor to CPU as it arrives (bounded device memory)."""


def _first_sentence(exc: BaseException) -> str:
    """The backend's own words, without gloo's generic advice ("This is typically caused by ...")."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.split(". This is typically")[0][:300]


class ProcessGroupStrategy(DistributedStrategy):
    """A strategy over a ``torch.distributed`` process group (gloo on CPU, NCCL on CUDA).

    Args:
        args: the training flags.
        environ: the launch environment (default: ``os.environ``); validated here.
    """

    def __init__(self, args: TrainingArgs, environ: Any = None) -> None:
        super().__init__(args)
        problems = launch_problems(environ)
        if problems:
            raise UsageError("; ".join(problems))
        self.env: LaunchEnv = launch_env(environ)
        self.rank = self.env.rank
        self.world_size = self.env.world_size
        self.local_rank = self.env.local_rank
        self._async_group: Any = None
        self._owns_group = False
        self._monitor: FaultMonitor | None = None

    def setup(self) -> None:
        """Initializes the default process group; a dedicated gloo group serves ``--async-save``."""
        if torch.cuda.is_available():
            if "LOCAL_RANK" not in os.environ:  # a platform launcher that sets only RANK/WORLD_SIZE
                self.local_rank = self.rank % torch.cuda.device_count()
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
            backend = "nccl"
        else:
            self.device = torch.device("cpu")
            backend = "gloo"
        timeout = datetime.timedelta(minutes=self.args.distributed_timeout_minutes)
        if not dist.is_initialized():  # an embedding program may have initialized it (and then owns it)
            dist.init_process_group(backend=backend, timeout=timeout)
            self._owns_group = True
        if dist.get_world_size() != self.world_size:
            raise UsageError(f"process group has {dist.get_world_size()} ranks but WORLD_SIZE={self.world_size}")
        if self.args.async_save:
            # Background checkpoint writes run collectives from another thread; sharing the training group
            # with them crashes gloo (and serializes behind NCCL kernels), so they get their own group.
            self._async_group = dist.new_group(backend="gloo", timeout=timeout)
        if os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT"):
            self._monitor = FaultMonitor(rank=self.rank, world_size=self.world_size,
                                         host=os.environ["MASTER_ADDR"], port=int(os.environ["MASTER_PORT"])).start()
        if self.is_main:
            logger.info("%s: %d processes on %d node(s), backend %s, collective timeout %g min", type(self).__name__,
                        self.world_size, self.env.num_nodes, backend, self.args.distributed_timeout_minutes)

    def on_failure(self, exc: Exception) -> BaseException | None:
        """This rank's own error is recorded for the others (each stops, naming this rank); a failed collective
        becomes a :class:`RankFailureError` quoting the rank that failed or naming the ranks that stopped
        responding (see :mod:`embodied_dist.faults`)."""
        monitor = self._monitor
        if monitor is None:
            return None
        if isinstance(exc, UsageError):  # every rank validates alike and reports it itself (rank 0 prints)
            return None
        if not is_collective_failure(exc):
            monitor.record(f"{type(exc).__name__}: {exc}")
            return None
        recorded = monitor.recorded_error()
        if recorded is not None:
            return RankFailureError(f"{recorded}; rank {self.rank} stopped with it (it was waiting for that rank)")
        silent = monitor.silent_ranks()
        reason = _first_sentence(exc)
        if silent is None:
            return RankFailureError(f"rank {self.rank}: the job's rendezvous store at {monitor.host}:{monitor.port} "
                                    "is unreachable, so the rank hosting it (rank 0 when no torchrun agent hosts "
                                    f"it) died or its node went down; a collective failed: {reason}")
        if silent:
            names = ", ".join(str(r) for r in silent)
            return RankFailureError(f"rank {names} stopped responding (its heartbeat stopped: killed, out of memory, "
                                    f"crashed or hung) while rank {self.rank} was in a collective, which failed: "
                                    f"{reason}")
        return RankFailureError(f"rank {self.rank}: a collective failed while every rank is still alive: {reason} "
                                f"(--distributed-timeout-minutes {self.args.distributed_timeout_minutes:g})")

    def close(self) -> None:
        """Flushes pending work (async saves), then destroys the process group if :meth:`setup` created it."""
        if self._monitor is not None:
            self._monitor.stop()
            self._monitor = None
        try:
            super().close()
        finally:
            if self._async_group is not None and dist.is_initialized():
                dist.destroy_process_group(self._async_group)
                self._async_group = None
            if self._owns_group and dist.is_initialized():
                dist.destroy_process_group()

    @property
    def async_checkpoint_process_group(self) -> Any:
        """The dedicated gloo group of ``--async-save``."""
        return self._async_group

    def barrier(self) -> None:
        """Waits for all ranks."""
        if self.device.type == "cuda":
            dist.barrier(device_ids=[self.local_rank])
        else:
            dist.barrier()

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """Mean of ``tensor`` over ranks (a new tensor)."""
        out = tensor.detach().to(self.device, copy=True)
        dist.all_reduce(out)
        return out / self.world_size

    def all_gather_scalars(self, tensor: torch.Tensor) -> torch.Tensor:
        """``[world_size, *shape]`` stack of every rank's tensor."""
        local = tensor.detach().to(self.device).contiguous()
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(parts, local)
        return torch.stack(parts)

    # --- full state dicts: safetensors/pt formats ---
    def model_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """The full model state on rank 0, on CPU (empty on other ranks)."""
        return get_model_state_dict(model, options=_FULL)

    def load_model_state_dict(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        """Loads a full model state (strict); each rank keeps its own shard under FSDP."""
        set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True, strict=True))

    def optimizer_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The full optimizer state keyed by parameter names, on rank 0 (empty elsewhere)."""
        return get_optimizer_state_dict(model, optimizer, options=_FULL)

    def load_optimizer_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                                  state: dict[str, Any]) -> None:
        """Restores a full, name-keyed optimizer state (sharded again under FSDP)."""
        set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
