"""``--distributed-strategy fsdp``: FSDP2 (``fully_shard``) over a 1-D mesh, or HSDP over a 2-D
(replicate x shard) mesh with ``--hsdp-shard-size``.

Dtypes: sharded parameters (what the optimizer updates) stay fp32 unless ``--fsdp-original-param-dtype``
says otherwise; the all-gathered compute copy follows ``--fsdp-unsharded-param-dtype`` or ``--dtype``;
gradients are reduced in ``--fsdp-reduce-dtype``. So ``--dtype bfloat16`` alone means bf16 compute with
fp32 master parameters and fp32 gradient reduction. Normalization layers keep fp32 compute weights.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard, register_fsdp_forward_method
from torch.distributed.tensor import DTensor

from embodied_core.config.training_args import TrainingArgs
from embodied_core.distributed.validation import parse_reshard_overrides, shard_group_size
from embodied_dist._base import ProcessGroupStrategy
from embodied_dist.wrap import select_units, set_explicit_prefetch, unit_reshard_policies

__all__ = ["FSDPStrategy", "build_fsdp"]

logger = logging.getLogger("embodied.dist")

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
_COMPUTE = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": None}
_NORMS = (nn.LayerNorm, nn.GroupNorm, nn.RMSNorm, nn.modules.batchnorm._BatchNorm)


class FSDPStrategy(ProcessGroupStrategy):
    """FSDP2 / HSDP with explicit or automatic units, per-unit reshard policy and a dtype policy."""

    mesh: DeviceMesh
    shards_parameters = True

    def setup(self) -> None:
        """Initializes the process group and the (replicate x shard) device mesh."""
        super().setup()
        shard = shard_group_size(self.args, self.env)
        replicate = self.world_size // shard
        if replicate > 1:
            self.mesh = init_device_mesh(self.device.type, (replicate, shard), mesh_dim_names=("replicate", "shard"))
        else:
            self.mesh = init_device_mesh(self.device.type, (shard,), mesh_dim_names=("shard",))
        if self.is_main:
            logger.info("FSDP mesh: %s", "x".join(str(s) for s in self.mesh.shape) +
                        (" (replicate x shard, HSDP)" if replicate > 1 else " (shard)"))

    @property
    def is_hsdp(self) -> bool:
        """A 2-D mesh: gradients are reduce-scattered in a shard group, then all-reduced across replicas."""
        return self.mesh.ndim == 2

    def mixed_precision(self) -> MixedPrecisionPolicy:
        """The dtype policy from ``--fsdp-*-dtype``, ``--fsdp-cast-forward-inputs`` and ``--dtype``."""
        args = self.args
        param_dtype = (_DTYPES[args.fsdp_unsharded_param_dtype] if args.fsdp_unsharded_param_dtype
                       else _COMPUTE[args.dtype])
        return MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=_DTYPES[args.fsdp_reduce_dtype],
                                    cast_forward_inputs=args.fsdp_cast_forward_inputs)

    def wrap_model(self, model: nn.Module) -> nn.Module:
        """Shards every unit (innermost first, each with its class's reshard policy), then the root, and sets the
        explicit prefetching; the module keeps its class and names. A model with meta parameters
        (``--init-on-meta``) stays meta: the trainer materializes the local shards afterwards."""
        args = self.args
        units = select_units(model, wrap_modules=args.fsdp_wrap_modules, no_wrap_modules=args.fsdp_no_wrap_modules,
                             min_num_params=args.fsdp_min_num_params,
                             leftover_min_num_params=args.fsdp_leftover_min_num_params)
        if args.fsdp_original_param_dtype:
            _cast_sharded_params(model, _DTYPES[args.fsdp_original_param_dtype], frozen_only=args.use_lora)
        if not any(t.is_meta for t in (*model.parameters(), *model.buffers())):
            model = model.to(self.device)  # --init-on-meta: fully_shard keeps meta parameters meta (shards later)
        policy = self.mixed_precision()
        for _, norm in self._fp32_norms(model, policy, units):
            fully_shard(norm, mesh=self.mesh, reshard_after_forward=args.fsdp_reshard_default,
                        mp_policy=MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=policy.reduce_dtype,
                                                       cast_forward_inputs=False))
        reshard = unit_reshard_policies(units, default=args.fsdp_reshard_default,
                                        overrides=parse_reshard_overrides(args.fsdp_reshard_module_overrides))
        for name, unit in units:
            fully_shard(unit, mesh=self.mesh, reshard_after_forward=reshard[name], mp_policy=policy)
        fully_shard(model, mesh=self.mesh, reshard_after_forward=args.fsdp_reshard_root, mp_policy=policy)
        set_explicit_prefetch(model, units, forward=args.fsdp_forward_prefetch_distance,
                              backward=args.fsdp_backward_prefetch_distance)
        # Inference goes through ModelPlugin.sample_actions, not forward: without this the root's parameters
        # would not be all-gathered before it runs.
        register_fsdp_forward_method(model, "sample_actions")
        if self.is_main:
            logger.info("FSDP units (%d): %s", len(units), ", ".join(n for n, _ in units) or "root only")
        return model

    @staticmethod
    def _fp32_norms(model: nn.Module, policy: MixedPrecisionPolicy,
                    units: list[tuple[str, nn.Module]]) -> list[tuple[str, nn.Module]]:
        """Normalization layers to keep in fp32 when computing in bf16/fp16 (their own small FSDP groups).

        CPU autocast runs norms with whatever dtypes it is given, so an fp32 activation meeting a bf16 norm
        weight fails; on GPU, autocast would upcast them anyway. FSDP1 exempted batch norms from mixed
        precision for the same reason.
        """
        if policy.param_dtype in (None, torch.float32):
            return []
        unit_ids = {id(m) for _, m in units}
        return [(n, m) for n, m in model.named_modules()
                if n and isinstance(m, _NORMS) and id(m) not in unit_ids and any(True for _ in m.parameters())]

    @contextlib.contextmanager
    def grad_sync(self, model: nn.Module, *, sync: bool) -> Iterator[None]:
        """Gradient reduction per micro-batch, as ``--fsdp-reduce-every-microbatch`` says.

        Reducing every micro-batch keeps only sharded gradients between micro-batches; reducing on the
        last keeps unsharded gradients of every unit until then. Under HSDP the replica all-reduce runs
        on the last micro-batch only in both modes (sharded gradients accumulate in between).
        """
        if not isinstance(model, FSDPModule):
            yield
            return
        if self.args.fsdp_reduce_every_microbatch:
            model.set_requires_gradient_sync(True)
            if self.is_hsdp:
                model.set_requires_all_reduce(sync)
        else:
            model.set_requires_gradient_sync(sync)
        yield

    def clip_grad_norm(self, model: nn.Module, max_norm: float) -> torch.Tensor:
        """Global gradient norm over DTensor shards; clips when ``max_norm > 0``.

        The per-shard norms are reduced over the mesh by DTensor: summed over the shard axis and not over
        the replicate axis (replicas hold the same shard), so HSDP counts each element once.
        """
        params = [p for p in model.parameters() if p.grad is not None]
        if not params:
            return torch.zeros((), device=self.device)
        grads = [p.grad for p in params]
        total = torch.nn.utils.get_total_norm(grads, foreach=True)
        if isinstance(total, DTensor):
            total = total.full_tensor()
        if max_norm > 0:
            torch.nn.utils.clip_grads_with_norm_(params, max_norm, total, foreach=True)
        return total


def _cast_sharded_params(model: nn.Module, dtype: torch.dtype, *, frozen_only: bool) -> None:
    """``--fsdp-original-param-dtype``: casts the parameters and floating buffers to ``dtype``.

    With ``--use-lora`` only the frozen base is cast; the adapters (and ``--lora-modules-to-save``) keep fp32
    master weights. A unit then holds parameters of two dtypes, which FSDP2 shards as they are: it requires one
    dtype only across a unit's trainable parameters (all fp32 here) and all-gathers mixed dtypes as bytes.
    """
    if not frozen_only:
        model.to(dtype)
        return
    for param in model.parameters():
        if not param.requires_grad and param.is_floating_point():
            param.data = param.data.to(dtype)
    for module in model.modules():
        for name, buffer in module.named_buffers(recurse=False):
            if buffer.is_floating_point():
                setattr(module, name, buffer.to(dtype))


def build_fsdp(args: TrainingArgs) -> FSDPStrategy:
    """Factory of the ``fsdp`` strategy."""
    return FSDPStrategy(args)
