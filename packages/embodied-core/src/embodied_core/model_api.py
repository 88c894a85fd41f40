"""The interface between data, model and trainer (DESIGN 5 and 6).

``Dataset -> sample dict -> sample_transform -> collate_fn -> PreparedBatch -> batch.to(device)
-> model(batch) -> ModelOutput(loss, metrics)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    import torch

__all__ = ["ModelOutput", "PreparedBatch", "TensorBatch", "Transforms", "collate_samples"]


@dataclasses.dataclass
class ModelOutput:
    """What ``model(batch)`` returns. ``metrics`` hold detached tensors; no ``.item()`` inside forward.

    A dataclass, not attrs: FSDP2 and DDP find the tensors of a module's output by walking dicts,
    sequences and dataclasses only; they must see ``loss`` to hook backward (re-gather resharded
    parameters, reduce gradients).
    """

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)


@runtime_checkable
class PreparedBatch(Protocol):
    """A model-ready batch that can move itself to a device."""

    def to(self, device: torch.device | str) -> PreparedBatch: ...


class TensorBatch(dict):
    """A dict batch: tensors move with ``.to(device)``; other values (task strings) stay as they are."""

    def to(self, device: torch.device | str) -> TensorBatch:
        import torch

        return TensorBatch({k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v
                            for k, v in self.items()})

    def __len__(self) -> int:  # the number of keys; see batch_size for the number of samples
        return dict.__len__(self)

    @property
    def batch_size(self) -> int:
        """Number of samples (leading dimension of the first tensor)."""
        import torch

        for value in self.values():
            if isinstance(value, torch.Tensor):
                return int(value.shape[0])
            if isinstance(value, list):
                return len(value)
        return 0


def _memory_order(tensor: torch.Tensor) -> list[int] | None:
    """The dimension order in which ``tensor`` is laid out densely (e.g. ``[1, 2, 0]`` for a CHW view of HWC
    memory), or None when it is contiguous as it is or not a permutation of dense memory."""
    if tensor.dim() < 2 or tensor.is_contiguous():
        return None
    order = sorted(range(tensor.dim()), key=lambda d: -tensor.stride(d))
    return order if tensor.permute(order).is_contiguous() else None


def _stack(values: Sequence[torch.Tensor]) -> torch.Tensor:
    """``torch.stack(values)``, copying in the samples' own memory order when they all are the same permuted view.

    Decoders hand frames out as NCHW views of NHWC memory; stacking them as they are copies element by element
    across strides (~15x slower for a batch of camera frames), while stacking the dense NHWC tensors is a plain
    copy. The result equals ``torch.stack(values)`` and keeps the samples' layout (e.g. channels-last).
    """
    import torch

    first = values[0]
    order = _memory_order(first)
    if order is not None and any(v.shape != first.shape or v.stride() != first.stride() for v in values[1:]):
        order = None
    dense = values if order is None else [v.permute(order) for v in values]
    stacked = torch.stack(dense, out=_shared_out(dense))
    return stacked if order is None else stacked.permute(
        0, *(d + 1 for d in sorted(range(len(order)), key=order.__getitem__)))


def _shared_out(values: Sequence[torch.Tensor]) -> torch.Tensor | None:
    """In a DataLoader worker, a shared-memory tensor to stack large ``values`` into (torch's default collate does
    the same): the batch then reaches the main process without the copy into shared memory that sending a
    private tensor makes (a batch of 9-frame 640x480 windows: 66 MB per batch). None elsewhere, and for tensors
    small enough to travel pickled (``embodied_core.data.transport.INLINE_MAX_BYTES``). A worker with a segment pool
    reuses segments the trainer is done with (``embodied_core.data.segment_pool``)."""
    import torch.utils.data

    from embodied_core.data.segment_pool import shared_empty
    from embodied_core.data.transport import INLINE_MAX_BYTES

    first = values[0]
    nbytes = sum(v.numel() for v in values) * first.element_size()
    if nbytes <= INLINE_MAX_BYTES or first.device.type != "cpu" or torch.utils.data.get_worker_info() is None:
        return None
    return shared_empty((len(values), *first.shape), first.dtype)


def collate_samples(samples: Sequence[Mapping[str, Any]]) -> TensorBatch:
    """Stacks tensors and numbers key by key; strings become lists. All samples must share keys.

    Tensors that are permuted views of dense memory (decoded frames) are stacked in their memory order
    (``_stack``): equal values, a fraction of the copy time."""
    import torch

    keys = list(samples[0])
    for i, sample in enumerate(samples[1:], start=1):
        if list(sample) != keys:
            raise ValueError(f"sample {i} has keys {sorted(sample)}, sample 0 has {sorted(keys)}")
    batch = TensorBatch()
    for key in keys:
        values = [s[key] for s in samples]
        first = values[0]
        if isinstance(first, torch.Tensor):
            batch[key] = _stack(values)
        elif isinstance(first, (bool, int, float)):
            batch[key] = torch.tensor(values)
        else:
            batch[key] = list(values)
    return batch


@attrs.define
class Transforms:
    """A model's data pipeline, shared by training and inference: a per-sample transform (runs in workers), a
    collate function and the postprocessing of sampled actions (what ``make_transforms`` returns)."""

    sample_transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Per-sample transform; None passes samples through unchanged (and skips per-sample RNG seeding).
    It also receives inference observations: the same keys without ``action`` (a transform must not need it)."""
    collate_fn: Callable[[Sequence[Mapping[str, Any]]], Any] = collate_samples
    """Stacks transformed samples into the model's PreparedBatch."""
    postprocess_actions: Callable[[torch.Tensor], torch.Tensor] | None = None
    """Inference: ``model.sample_actions`` output ``[B, H, D_model]`` -> dataset units ``[B, H, action_dim]``
    (unnormalize, drop padding dims); None when the model's actions already are in dataset units."""
