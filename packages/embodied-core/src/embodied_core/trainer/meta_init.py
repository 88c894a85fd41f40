"""``--init-on-meta``: build the model without memory, materialize only what this rank holds, initialize it.

1. :func:`build_on_meta`: the plugin's factory runs under ``torch.device("meta")``: parameters and buffers get
   shapes but no storage (a 5B model costs nothing on the host).
2. The strategy shards the meta model (FSDP: each parameter becomes a DTensor whose local shard is still meta), or,
   for one process / DDP, the whole model is materialized on the device before wrapping.
3. :func:`materialize`: storage for what was meta, on the device, then the model's own initialization
   (``ModelPlugin.init_module_weights``) module by module, children before parents, as building does
   (transformers' ``_init_weights`` runs in that order too). A sharded parameter is initialized as a full tensor
   on the device, one FSDP unit at a time, and each rank keeps its slice: every rank draws the same numbers
   (one seed), so the sharded model equals the unsharded one whatever the world size. Every materialized tensor
   is filled with NaN (or a sentinel integer) first, so one that the model's initialization leaves untouched is
   an error naming it instead of uninitialized memory.
4. ``--pretrained-checkpoint`` / ``--resume`` weights are then streamed in a tensor at a time
   (:func:`embodied_core.checkpoint.shard_copy.copy_full_into`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import attrs
import torch
from torch import nn

from embodied_core.errors import PluginError

__all__ = ["MaterializeReport", "build_on_meta", "has_meta_tensors", "materialize"]


def build_on_meta(build: Callable[[], nn.Module]) -> nn.Module:
    """``build()`` with every tensor it creates on the meta device (explicit ``device=`` arguments still win)."""
    with torch.device("meta"):
        return build()


def has_meta_tensors(model: nn.Module) -> bool:
    """Whether any parameter or buffer of ``model`` is still on the meta device."""
    return any(t.is_meta for t in (*model.parameters(), *model.buffers()))


@attrs.frozen
class MaterializeReport:
    """What :func:`materialize` did: tensors materialized, local elements and the largest full tensor built."""

    tensors: int
    local_elements: int
    largest_full_elements: int

    def __str__(self) -> str:
        return (f"--init-on-meta: materialized {self.tensors} tensors ({self.local_elements:,} elements on this rank; "
                f"largest temporary full tensor {self.largest_full_elements:,} elements)")


def _post_order(module: nn.Module) -> Iterator[nn.Module]:
    for child in module.children():
        yield from _post_order(child)
    yield module


def _is_unit(module: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


def _groups(model: nn.Module) -> list[list[nn.Module]]:
    """Modules in post-order, grouped by their innermost FSDP unit (or the root): a unit's full parameters exist
    only while its group is initialized, and an initialization that reaches into a child of the same unit
    (transformers' attention init sets its projections) finds full tensors there."""
    owner: dict[int, int] = {}

    def walk(module: nn.Module, group: int) -> None:
        group = id(module) if _is_unit(module) else group
        owner[id(module)] = group
        for child in module.children():
            walk(child, group)

    walk(model, id(model))
    groups: dict[int, list[nn.Module]] = {}
    for module in _post_order(model):
        groups.setdefault(owner[id(module)], []).append(module)
    return list(groups.values())


def _fill_sentinel(tensor: torch.Tensor) -> None:
    if tensor.is_floating_point() or tensor.is_complex():
        tensor.fill_(float("nan"))
    elif tensor.dtype != torch.bool:
        tensor.fill_(torch.iinfo(tensor.dtype).min)


def _untouched(tensor: torch.Tensor) -> bool:
    if tensor.is_floating_point() or tensor.is_complex():
        return bool(torch.isnan(tensor).any())
    if tensor.dtype == torch.bool:
        return False
    return bool((tensor == torch.iinfo(tensor.dtype).min).any())


class _Group:
    """The meta-born tensors of one group, swapped for full tensors (sharded parameters) while it initializes."""

    def __init__(self, modules: list[nn.Module], born_meta: dict[int, set[str]], device: torch.device) -> None:
        from torch.distributed.tensor import DTensor

        self.entries: list[tuple[nn.Module, str, str, torch.Tensor]] = []  # module, kind, name, original
        self.largest = 0
        for module in modules:
            for kind, tensors in (("param", module._parameters), ("buffer", module._buffers)):
                for name, tensor in tensors.items():
                    if tensor is None or name not in born_meta.get(id(module), ()):
                        continue
                    self.entries.append((module, kind, name, tensor))
                    if isinstance(tensor, DTensor):  # the full tensor, on the device, only while initializing
                        full = torch.empty(tensor.shape, dtype=tensor.dtype, device=device)
                        self.largest = max(self.largest, full.numel())
                        _fill_sentinel(full)
                        tensors[name] = nn.Parameter(full, requires_grad=tensor.requires_grad) if kind == "param" \
                            else full
                    else:
                        _fill_sentinel(tensor)

    def finish(self, *, where: Callable[[nn.Module], str]) -> int:
        """Checks every tensor was initialized, copies shards back and restores the sharded parameters."""
        from torch.distributed.tensor import DTensor

        from embodied_core.checkpoint.shard_copy import copy_full_into

        elements = 0
        for module, kind, name, original in self.entries:
            tensors = module._parameters if kind == "param" else module._buffers
            value = tensors[name]
            if _untouched(value):
                raise PluginError(f"--init-on-meta: {kind} {where(module)}.{name} ({type(module).__name__}) was left "
                                  "uninitialized by the model's init_module_weights; the model plugin must initialize "
                                  "it there (override EmbodiedModel.init_module_weights)")
            if isinstance(original, DTensor):
                copy_full_into(original, value.detach(), name=f"{where(module)}.{name}")
                tensors[name] = original
                elements += original.to_local().numel()
            else:
                elements += value.numel()
        return elements


@torch.no_grad()
def materialize(model: nn.Module, *, device: torch.device, init: Callable[[nn.Module], None],
                seed: int) -> MaterializeReport:
    """Gives every meta tensor of ``model`` storage on ``device`` (only the local shard of a DTensor) and fills it
    with ``init`` (the model's ``init_module_weights``), seeded with ``seed`` on every rank alike.

    Tensors that were not meta (built with an explicit device) are left as they are.

    Raises:
        PluginError: a materialized parameter or buffer that ``init`` left uninitialized, naming it.
    """
    born_meta = {id(m): {n for n, t in (*m._parameters.items(), *m._buffers.items()) if t is not None and t.is_meta}
                 for m in model.modules()}
    model._apply(lambda t: torch.empty_like(t, device=device) if t.is_meta else t)
    names = {id(m): n or type(model).__name__ for n, m in model.named_modules()}
    torch.manual_seed(seed)  # the same draws on every rank: shards of one full initialization
    tensors = local = largest = 0
    for modules in _groups(model):
        group = _Group(modules, born_meta, device)
        for module in modules:
            if born_meta.get(id(module)) or any(born_meta.get(id(m)) for m in module.children()):
                init(module)
        local += group.finish(where=lambda m: names[id(m)])
        tensors += len(group.entries)
        largest = max(largest, group.largest)
    return MaterializeReport(tensors=tensors, local_elements=local, largest_full_elements=largest)
