"""The contract of a distributed strategy (group ``embodied.distributed_strategies``) and the
single-process strategy.

The trainer talks to the model, optimizer and checkpoints only through a strategy, so DDP, ZeRO-1 and
FSDP2 (package embodied-dist) change none of the training loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from embodied_core.config.training_args import TrainingArgs

__all__ = ["DistributedStrategy", "SingleProcessStrategy"]

OptimizerFactory = Callable[[Iterable[dict[str, Any]]], torch.optim.Optimizer]


class DistributedStrategy:
    """Base class: one process, no wrapping. Subclasses override what differs.

    A strategy is constructed with the training args and must not touch the process group before
    :meth:`setup`.

    Attributes:
        optimizer_state_is_sharded: every rank holds a different part of the optimizer state (ZeRO-1),
            so file-based checkpoints store one optimizer file per rank.
        shards_parameters: every rank holds a shard of each parameter (FSDP): ``wrap_model`` accepts a model on
            the meta device (``--init-on-meta``) and shards it; the trainer then materializes the local shards.
            False: the trainer materializes the whole model on the device before ``wrap_model``.
    """

    optimizer_state_is_sharded: bool = False
    shards_parameters: bool = False

    def __init__(self, args: TrainingArgs) -> None:
        self.args = args
        self.rank = 0
        self.world_size = 1
        self.local_rank = 0
        self.device = torch.device("cpu")
        self._close_callbacks: list[Callable[[], None]] = []

    # --- lifecycle ---
    def setup(self) -> None:
        """Initializes the process group (if any) and picks this rank's device."""
        self.device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() \
            else torch.device("cpu")

    def close(self) -> None:
        """Runs the :meth:`on_close` callbacks (newest first), then releases the process group (if any)."""
        while self._close_callbacks:
            self._close_callbacks.pop()()

    def on_failure(self, exc: Exception) -> BaseException | None:
        """Called with an exception leaving the training loop on this rank, before anything is closed; returns the
        exception to raise instead (e.g. one naming the rank that died), or None to raise ``exc``. A strategy
        over several processes makes sure no other rank is left waiting for this one."""
        return None

    def on_close(self, callback: Callable[[], None]) -> None:
        """Registers work that must finish before the process group goes away (pending async saves)."""
        self._close_callbacks.append(callback)

    @property
    def checkpoint_process_group(self) -> Any:
        """Process group of checkpoint I/O (DCP); None = the default group, or no group at all."""
        return None

    @property
    def async_checkpoint_process_group(self) -> Any:
        """Process group of asynchronous DCP saves (a dedicated gloo group under torch.distributed)."""
        return None

    @property
    def is_main(self) -> bool:
        """True on the rank that writes logs and shared files."""
        return self.rank == 0

    def barrier(self) -> None:
        """Waits for all ranks."""

    # --- model and optimizer ---
    def wrap_model(self, model: nn.Module) -> nn.Module:
        """Moves the model to the device and wraps it for distribution."""
        return model.to(self.device)

    def unwrap_model(self, model: nn.Module) -> nn.Module:
        """The user's module inside any wrapper."""
        return model

    def build_optimizer(self, param_groups: list[dict[str, Any]], factory: OptimizerFactory) -> torch.optim.Optimizer:
        """Builds the optimizer (ZeRO-1 wraps the factory here)."""
        return factory(param_groups)

    @contextlib.contextmanager
    def grad_sync(self, model: nn.Module, *, sync: bool) -> Iterator[None]:
        """Context for one micro-batch's backward; gradients are reduced only when ``sync``."""
        yield

    def clip_grad_norm(self, model: nn.Module, max_norm: float) -> torch.Tensor:
        """Total gradient norm over all ranks; clips when ``max_norm > 0`` (else only measures)."""
        params = [p for p in model.parameters() if p.grad is not None]
        if not params:
            return torch.zeros((), device=self.device)
        if max_norm > 0:
            return torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
        return torch.nn.utils.get_total_norm([p.grad for p in params], foreach=True)

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """Mean of ``tensor`` over ranks."""
        return tensor

    def all_gather_scalars(self, tensor: torch.Tensor) -> torch.Tensor:
        """``[world_size, *tensor.shape]`` stack of every rank's tensor."""
        return tensor.unsqueeze(0)

    # --- checkpoint state ---
    def model_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Full (unsharded) model state, on CPU, on the main rank (may be empty elsewhere)."""
        return {k: v.detach().cpu() for k, v in self.unwrap_model(model).state_dict().items()}

    def load_model_state_dict(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        """Loads a full model state (strict)."""
        self.unwrap_model(model).load_state_dict(state, strict=True)

    def sharded_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
        """Model and optimizer state keyed by parameter names (FQNs), for DCP.

        Keys never depend on the wrapper (no ``module.`` prefix), and optimizer state is keyed by
        parameter name instead of position, so a checkpoint written by one strategy and world size
        loads into another: DCP reshards tensors (DTensor shards under FSDP, whole tensors otherwise).
        """
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

        state: dict[str, Any] = {"model": get_model_state_dict(model)}
        if optimizer is not None:
            state["optim"] = get_optimizer_state_dict(model, optimizer)
        return state

    def load_sharded_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None,
                                state: dict[str, Any]) -> None:
        """Applies what :meth:`sharded_state_dict` produced (after DCP filled it in place)."""
        from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

        set_model_state_dict(model, state["model"])
        if optimizer is not None and "optim" in state:
            set_optimizer_state_dict(model, optimizer, state["optim"])

    def load_sharded_checkpoint(self, directory: Path, model: nn.Module,
                                optimizer: torch.optim.Optimizer | None) -> None:
        """Loads model (and optimizer) state from the DCP directory ``directory`` into this topology.

        Reads through :func:`embodied_core.checkpoint.dcp_reader.dcp_load` (restricted metadata unpickler,
        ``weights_only`` blobs): a crafted checkpoint is a CheckpointError, never code that runs.
        """
        from embodied_core.checkpoint.dcp_reader import dcp_load

        state = self.sharded_state_dict(model, optimizer)
        dcp_load(state, directory, process_group=self.checkpoint_process_group)
        self.load_sharded_state_dict(model, optimizer, state)

    def optimizer_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """Optimizer state to checkpoint (this rank's part for sharded optimizers)."""
        return optimizer.state_dict()

    def load_optimizer_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                                  state: dict[str, Any]) -> None:
        """Restores what :meth:`optimizer_state_dict` produced."""
        optimizer.load_state_dict(state)


class SingleProcessStrategy(DistributedStrategy):
    """One process, unwrapped model (what ``--distributed-strategy`` means with WORLD_SIZE=1)."""


def build_single(args: TrainingArgs) -> DistributedStrategy:
    """Factory of the ``single`` strategy."""
    return SingleProcessStrategy(args)
