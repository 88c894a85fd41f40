"""Copying a full (unsharded) tensor into a parameter that may be a DTensor shard (FSDP2).

Weights are read a tensor at a time; under FSDP each rank copies only the slice its shard covers, straight from
the full tensor it just read (no collective, no copy of the full tensor on the device). This is what lets
``--init-on-meta`` stream ``--pretrained-checkpoint`` and ``--resume`` weights into local shards.
"""

from __future__ import annotations

import torch

from embodied_core.errors import CheckpointError

__all__ = ["copy_full_into", "local_slice"]


def local_slice(full: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The part of ``full`` that ``target`` holds: all of it for a plain tensor, this rank's shard for a DTensor."""
    from torch.distributed.tensor import DTensor

    if not isinstance(target, DTensor):
        return full
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    shape, offset = compute_local_shape_and_global_offset(full.shape, target.device_mesh, target.placements)
    part = full
    for dim, (size, start) in enumerate(zip(shape, offset, strict=True)):
        if size != full.shape[dim]:
            part = part.narrow(dim, start, size)
    return part


@torch.no_grad()
def copy_full_into(target: torch.Tensor, full: torch.Tensor, *, name: str) -> None:
    """Copies ``full`` (cast to ``target``'s dtype) into ``target``, only the local shard of a DTensor.

    Raises:
        CheckpointError: ``target`` is still on the meta device (weights loaded into a model built with
            ``--init-on-meta`` before it was materialized would be lost).
    """
    from torch.distributed.tensor import DTensor

    if target.is_meta:
        raise CheckpointError(f"cannot load {name} into a parameter on the meta device: the model was built with "
                              "--init-on-meta and is not materialized yet (a model plugin loading weights while it "
                              "is built must take them through --pretrained-checkpoint instead)")
    local = target.to_local() if isinstance(target, DTensor) else target
    local.copy_(local_slice(full, target))
