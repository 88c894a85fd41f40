"""ZeRO-1: ``ZeroRedundancyOptimizer`` over any optimizer plugin, optional fp32 master weights, and its
checkpoint state keyed by parameter name.

Each rank owns whole parameters (ZeRO partitions parameters, not elements), so this rank's optimizer
state is a plain ``{"state": {fqn: {...}}, "param_groups": [...]}`` restricted to the parameters it owns:
the same layout ``get_optimizer_state_dict`` produces for DDP and FSDP. A DCP checkpoint written by ZeRO
therefore loads into DDP, FSDP, or ZeRO on another world size, and vice versa.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.optim import ZeroRedundancyOptimizer

from embodied_core.checkpoint.dcp_reader import dcp_load, load_dcp_keys
from embodied_core.distributed.base import OptimizerFactory

__all__ = ["MasterWeightOptimizer", "build_zero_optimizer", "load_local_state_dict", "load_sharded",
           "local_state_dict"]

_MASTER = "master_fp32"
"""Extra per-parameter optimizer state key holding the fp32 master weight (``--zero-master-param-dtype fp32``)."""


class MasterWeightOptimizer(torch.optim.Optimizer):
    """Runs ``inner_class`` on fp32 copies of low-precision parameters and writes the result back.

    ZeRO-1 builds one per rank over the parameters that rank owns, so the fp32 masters (and the
    optimizer state) of a parameter exist on one rank only.

    Args:
        params: parameter groups of low-precision (bf16/fp16) parameters.
        inner_class: the optimizer class that updates the fp32 masters.
        defaults: its hyperparameters.
    """

    def __init__(self, params: Any, *, inner_class: type[torch.optim.Optimizer], **defaults: Any) -> None:
        super().__init__(params, defaults)
        self.masters: dict[torch.Tensor, torch.Tensor] = {}
        inner_groups = []
        for group in self.param_groups:
            masters = []
            for p in group["params"]:
                self.masters[p] = p.detach().float().clone().requires_grad_(p.requires_grad)
                masters.append(self.masters[p])
            inner_groups.append({**_hyperparameters(group), "params": masters})
        self.inner = inner_class(inner_groups, **defaults)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        """Copies gradients to the masters (fp32), steps the inner optimizer, writes the masters back."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group, inner_group in zip(self.param_groups, self.inner.param_groups, strict=True):
            inner_group.update(_hyperparameters(group))  # LR schedule and other per-step changes
            for p in group["params"]:
                self.masters[p].grad = None if p.grad is None else p.grad.float()
        self.inner.step()
        for p, master in self.masters.items():
            p.copy_(master)
        return loss

    def state_of(self, param: torch.Tensor) -> dict[str, Any]:
        """Optimizer state of ``param`` (held by its master), plus the master itself."""
        state = self.inner.state.get(self.masters[param], {})
        return {**state, _MASTER: self.masters[param].detach()} if state else {}


def _hyperparameters(group: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in group.items() if k not in ("params", "inner_class")}


def build_zero_optimizer(param_groups: list[dict[str, Any]], factory: OptimizerFactory, *,
                         parameters_as_bucket_view: bool, fp32_master: bool) -> ZeroRedundancyOptimizer:
    """ZeroRedundancyOptimizer over the plugin optimizer's class and hyperparameters.

    The plugin is built once over the groups to learn its class and per-group settings (cheap: optimizer
    state is created lazily at the first step); ZeRO then builds one per rank over its own parameters.
    """
    probe = factory(param_groups)
    cls = type(probe)
    accepted = inspect.signature(cls.__init__).parameters
    defaults = {k: v for k, v in probe.defaults.items() if k in accepted}
    groups = [dict(group) for group in probe.param_groups]
    del probe
    if fp32_master:
        return ZeroRedundancyOptimizer(groups, optimizer_class=MasterWeightOptimizer,
                                       parameters_as_bucket_view=parameters_as_bucket_view, inner_class=cls,
                                       **defaults)
    return ZeroRedundancyOptimizer(groups, optimizer_class=cls, parameters_as_bucket_view=parameters_as_bucket_view,
                                   **defaults)


def _local_params(optimizer: ZeroRedundancyOptimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.optim.param_groups for p in group["params"]]


def _state_of(optimizer: ZeroRedundancyOptimizer, param: torch.Tensor) -> dict[str, Any]:
    local = optimizer.optim
    if isinstance(local, MasterWeightOptimizer):
        return local.state_of(param)
    return dict(local.state.get(param, {}))


def local_state_dict(model: nn.Module, optimizer: ZeroRedundancyOptimizer) -> dict[str, Any]:
    """This rank's optimizer state keyed by parameter name, and the (global) parameter groups."""
    names = {id(p): name for name, p in model.named_parameters()}
    state = {}
    for p in _local_params(optimizer):
        entry = _state_of(optimizer, p)
        if entry:
            state[names[id(p)]] = entry
    groups = [{**{k: v for k, v in _hyperparameters(group).items() if not isinstance(v, type)},
               "params": [names[id(p)] for p in group["params"]]} for group in optimizer.param_groups]
    return {"state": state, "param_groups": groups}


def load_local_state_dict(model: nn.Module, optimizer: ZeroRedundancyOptimizer, saved: dict[str, Any]) -> None:
    """Restores the entries of ``saved`` for the parameters this rank owns, and the group settings.

    ``saved`` may hold more parameters (a whole optimizer, or another world size's partition).
    """
    names = {id(p): name for name, p in model.named_parameters()}
    local = optimizer.optim
    for p in _local_params(optimizer):
        entry = saved["state"].get(names[id(p)])
        if entry is None:
            continue
        target = p
        if isinstance(local, MasterWeightOptimizer):
            target = local.masters[p]
            with torch.no_grad():
                target.copy_(entry[_MASTER] if _MASTER in entry else p.float())
                p.copy_(target)
        inner = local.inner if isinstance(local, MasterWeightOptimizer) else local
        inner.state[target] = {k: _like(v, target, k) for k, v in entry.items() if k != _MASTER}
    for group, saved_group in zip(optimizer.param_groups, saved["param_groups"], strict=True):
        group.update({k: v for k, v in saved_group.items() if k != "params"})


def _like(value: Any, param: torch.Tensor, key: str) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    if key == "step":  # torch optimizers keep the step count as a float32 CPU scalar unless capturable/fused
        return value.detach().clone()
    return value.detach().to(device=param.device, dtype=param.dtype, copy=True)


def load_sharded(directory: Path, model: nn.Module, optimizer: ZeroRedundancyOptimizer, *,
                 process_group: Any = None) -> None:
    """Loads model weights and the optimizer entries this rank owns from a DCP checkpoint."""
    model_state = {"model": get_model_state_dict(model)}
    dcp_load(model_state, directory, process_group=process_group)  # the safe reader: no code from the files
    set_model_state_dict(model, model_state["model"])
    names = {id(p): name for name, p in model.named_parameters()}
    keys = {f"optim.state.{names[id(p)]}" for p in _local_params(optimizer)} | {"optim.param_groups"}
    loaded = load_dcp_keys(directory, keys, process_group=process_group)["optim"]
    loaded.setdefault("state", {})
    load_local_state_dict(model, optimizer, loaded)
