"""``--distributed-strategy ddp``: DistributedDataParallel, optionally with a ZeRO-1 optimizer.

Gradients are all-reduced in buckets during backward; ``no_sync`` skips that for every micro-batch of
an accumulation step but the last, so GA costs one all-reduce per update.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict
from torch.nn.parallel import DistributedDataParallel

from embodied_core.config.training_args import TrainingArgs
from embodied_core.distributed.base import OptimizerFactory
from embodied_core.distributed.validation import DDP_KEYWORDS
from embodied_core.model_api import ModelOutput
from embodied_dist import zero
from embodied_dist._base import ProcessGroupStrategy
from embodied_dist.comm_hooks import register_comm_hook

__all__ = ["DDPStrategy", "build_ddp"]

_LOW_PRECISION = {"bfloat16": torch.bfloat16, "float16": torch.float16}


class _DDP(DistributedDataParallel):
    """DDP that sees the tensors inside :class:`ModelOutput`.

    With ``find_unused_parameters`` or ``static_graph``, DDP finds the tensors backward starts from by
    walking the forward output, and routes them through its sink with ``torch.utils._pytree``, to which a
    dataclass is an opaque leaf (the static graph's delayed all-reduce would never run). The output is
    handed to DDP as a dict and rebuilt afterwards.
    """

    def _post_forward(self, output: Any) -> Any:
        if not isinstance(output, ModelOutput):
            return super()._post_forward(output)
        out = super()._post_forward({"loss": output.loss, "metrics": dict(output.metrics)})
        return ModelOutput(loss=out["loss"], metrics=out["metrics"])


def _flag_default(name: str) -> object:
    default = attrs.fields_dict(TrainingArgs)[name].default
    return default.factory() if isinstance(default, attrs.Factory) else default  # type: ignore[attr-defined]


class DDPStrategy(ProcessGroupStrategy):
    """DDP with the ``--ddp-*`` options; ``--zero-optimizer`` shards optimizer state (ZeRO-1).

    Under ZeRO-1 every rank owns the optimizer state of a subset of parameters. Checkpoints store each
    rank's part under its own name (no consolidation on save: that would move every parameter's state
    through rank 0 at every save); ``embodied checkpoint convert --optimizer`` builds the whole optimizer
    state offline when it is asked for.
    """

    def __init__(self, args: TrainingArgs, environ: Any = None) -> None:
        super().__init__(args, environ)
        self.optimizer_state_is_sharded = args.zero_optimizer

    @property
    def master_dtype_split(self) -> bool:
        """Parameters stored in --dtype with fp32 masters in the ZeRO shards."""
        return self.args.zero_optimizer and self.args.zero_master_param_dtype == "fp32"

    def wrap_model(self, model: nn.Module) -> nn.Module:
        """Moves the model to this rank's device (in --dtype with fp32 ZeRO masters) and wraps it in DDP with the
        ``--ddp-*`` options and ``--ddp-comm-hook``."""
        model = model.to(self.device)
        if self.master_dtype_split:
            model = model.to(_LOW_PRECISION[self.args.dtype])
        args = self.args
        options: dict[str, Any] = {
            "find_unused_parameters": args.ddp_find_unused_parameters,
            "static_graph": args.ddp_static_graph,
            "gradient_as_bucket_view": args.ddp_gradient_as_bucket_view,
        }
        if args.ddp_bucket_cap_mb is not None:
            options["bucket_cap_mb"] = args.ddp_bucket_cap_mb
        # validated against this torch's DDP signature (a flag set on a torch that lacks it is a usage error)
        options.update({kw: getattr(args, flag) for flag, kw in DDP_KEYWORDS.items()
                        if getattr(args, flag) != _flag_default(flag)})
        if self.device.type == "cuda":
            options["device_ids"] = [self.local_rank]
        self._set_dynamo_optimize_ddp(args.dynamo_optimize_ddp)
        wrapped = _DDP(model, **options)
        if args.ddp_comm_hook is not None:
            register_comm_hook(wrapped, args.ddp_comm_hook, log=args.ddp_comm_hook_logging, is_main=self.is_main)
        return wrapped

    def _set_dynamo_optimize_ddp(self, value: bool) -> None:
        """``--dynamo-optimize-ddp`` for this run (restored when the strategy closes).

        torch._dynamo is imported only when it must change: its default is True, so an untouched default in a
        process that never compiled anything needs nothing.
        """
        if value and "torch._dynamo" not in sys.modules:
            return
        import torch._dynamo

        previous = torch._dynamo.config.optimize_ddp
        torch._dynamo.config.optimize_ddp = value
        self.on_close(lambda: setattr(torch._dynamo.config, "optimize_ddp", previous))

    def unwrap_model(self, model: nn.Module) -> nn.Module:
        """The user's module inside DDP."""
        return model.module if isinstance(model, DistributedDataParallel) else model

    @contextlib.contextmanager
    def grad_sync(self, model: nn.Module, *, sync: bool) -> Iterator[None]:
        """All-reduce on the last micro-batch only (``no_sync`` before it)."""
        if sync or not isinstance(model, DistributedDataParallel):
            yield
        else:
            with model.no_sync():
                yield

    def build_optimizer(self, param_groups: list[dict[str, Any]], factory: OptimizerFactory) -> torch.optim.Optimizer:
        """The plugin optimizer, or a ZeroRedundancyOptimizer over it with ``--zero-optimizer``."""
        if not self.args.zero_optimizer:
            return factory(param_groups)
        return zero.build_zero_optimizer(param_groups, factory,
                                         parameters_as_bucket_view=self.args.zero_parameters_as_bucket_view,
                                         fp32_master=self.master_dtype_split)

    # --- ZeRO-1 checkpoint state (plain DDP uses the base class) ---
    def optimizer_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """ZeRO-1: this rank's part keyed by parameter name; plain DDP: the full state on rank 0."""
        if not self.args.zero_optimizer:
            return super().optimizer_state_dict(model, optimizer)
        return zero.local_state_dict(self.unwrap_model(model), optimizer)

    def load_optimizer_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                                  state: dict[str, Any]) -> None:
        """Restores what :meth:`optimizer_state_dict` saved on this rank."""
        if not self.args.zero_optimizer:
            super().load_optimizer_state_dict(model, optimizer, state)
            return
        zero.load_local_state_dict(self.unwrap_model(model), optimizer, state)

    def sharded_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
        """Name-keyed state for DCP; under ZeRO-1 each rank contributes the optimizer state it owns."""
        if not self.args.zero_optimizer or optimizer is None:
            return super().sharded_state_dict(model, optimizer)
        # With fp32 masters the weights are stored in --dtype and each master rides along in its
        # parameter's optimizer state, so no precision is lost on resume.
        return {"model": get_model_state_dict(model),
                "optim": zero.local_state_dict(self.unwrap_model(model), optimizer)}

    def load_sharded_checkpoint(self, directory: Path, model: nn.Module,
                                optimizer: torch.optim.Optimizer | None) -> None:
        """ZeRO-1 reads only the optimizer entries of the parameters this rank owns (any saved topology)."""
        if not self.args.zero_optimizer or optimizer is None:
            super().load_sharded_checkpoint(directory, model, optimizer)
            return
        zero.load_sharded(directory, self.unwrap_model(model), optimizer,
                          process_group=self.checkpoint_process_group)


def build_ddp(args: TrainingArgs) -> DDPStrategy:
    """Factory of the ``ddp`` strategy."""
    return DDPStrategy(args)
