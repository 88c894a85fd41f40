"""Adapter tensors in PEFT's naming: gathering them from a (wrapped, sharded) model and loading them back.

Inside the model an adapter weight is ``<layer>.lora_A.default.weight`` and a fully trained module's copy is
``<module>.modules_to_save.default.<name>``; PEFT's files name them ``base_model.model.<layer>.lora_A.weight`` and
``base_model.model.<module>.<name>`` (what ``PeftModel.save_pretrained`` writes). The mapping between the two
is taken from PEFT itself (:func:`peft_key_map`), so it follows PEFT's rules, bias handling included.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from embodied_core.distributed.base import DistributedStrategy
from embodied_core.errors import CheckpointError

__all__ = ["ADAPTER_NAME", "PEFT_PREFIX", "adapter_shapes", "adapter_state_dict", "load_adapter_state_dict",
           "peft_key_map", "strip_prefix"]

ADAPTER_NAME = "default"
PEFT_PREFIX = "base_model.model."
"""Prefix of every key in ``adapter_model.safetensors`` (PEFT's ``PeftModel`` wraps the base model under it)."""


def peft_key_map(module: nn.Module) -> dict[str, str]:
    """``{key in module.state_dict(): key in PEFT's adapter state dict}`` for every tensor the adapter file holds.

    PEFT's own selection and renaming (``get_peft_model_state_dict``) runs over placeholder values that carry
    each key's position, so the result is exactly PEFT's, without reading any tensor.
    """
    from peft import get_peft_model_state_dict

    names = list(module.state_dict(keep_vars=True))
    placeholders = {name: torch.tensor(index) for index, name in enumerate(names)}
    selected = get_peft_model_state_dict(module, state_dict=placeholders, adapter_name=ADAPTER_NAME,
                                         save_embedding_layers=False)
    return {names[int(value)]: key for key, value in selected.items()}


def strip_prefix(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keys without PEFT's ``base_model.model.`` prefix (files written by ``PeftModel`` or by us carry it)."""
    return {key.removeprefix(PEFT_PREFIX): value for key, value in state.items()}


def _full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor on CPU (a collective for a sharded DTensor: every rank calls it in the same order)."""
    from torch.distributed.tensor import DTensor

    if isinstance(tensor, DTensor):
        tensor = tensor.full_tensor()
    return tensor.detach().to("cpu", copy=True).contiguous()


def adapter_state_dict(model: nn.Module, strategy: DistributedStrategy) -> dict[str, torch.Tensor]:
    """The adapter tensors under PEFT's file keys (``base_model.model.`` prefix), on CPU, on the main rank.

    Only the adapter tensors are gathered (never the frozen base); under FSDP each is all-gathered in turn, so
    every rank must call this. Other ranks get an empty dict.
    """
    module = strategy.unwrap_model(model)
    tensors = module.state_dict(keep_vars=True)
    out: dict[str, torch.Tensor] = {}
    for model_key, peft_key in peft_key_map(module).items():
        full = _full(tensors[model_key])
        if strategy.is_main:
            out[PEFT_PREFIX + peft_key] = full
    return out


def adapter_shapes(module: nn.Module) -> dict[str, tuple[int, ...]]:
    """PEFT file key -> global shape of every adapter tensor of ``module`` (sharded tensors report their full shape)."""
    tensors = module.state_dict(keep_vars=True)
    return {PEFT_PREFIX + peft_key: tuple(tensors[model_key].shape)
            for model_key, peft_key in peft_key_map(module).items()}


def load_adapter_state_dict(model: nn.Module, state: dict[str, torch.Tensor], strategy: DistributedStrategy | None,
                            *, source: str) -> None:
    """Loads adapter tensors (PEFT keys, with or without the prefix) into ``model`` (wrapped or not, sharded or not).

    Every adapter tensor of the model must be in ``state`` and nothing else may be: a CheckpointError names
    ``source`` and the keys otherwise. Each rank reads the (small) whole file; FSDP keeps its own shard of it.
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    module = strategy.unwrap_model(model) if strategy is not None else model
    by_peft = {peft_key: model_key for model_key, peft_key in peft_key_map(module).items()}
    given = strip_prefix(state)
    missing = sorted(set(by_peft) - set(given))
    unexpected = sorted(set(given) - set(by_peft))
    if missing or unexpected:
        parts = [f"{len(keys)} {label}: {', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}"
                 for label, keys in (("missing", missing), ("unexpected", unexpected)) if keys]
        raise CheckpointError(f"{source}: the adapters do not fit the model's LoRA layers ({'; '.join(parts)}); "
                              "were they trained with other --lora-target-modules / --lora-modules-to-save?")
    current = module.state_dict(keep_vars=True)
    shaped: dict[str, Any] = {}
    for peft_key, model_key in by_peft.items():
        tensor, target = given[peft_key], current[model_key]
        if tuple(tensor.shape) != tuple(target.shape):
            raise CheckpointError(f"{source}: {PEFT_PREFIX + peft_key} has shape {tuple(tensor.shape)}, the model's "
                                  f"adapter {tuple(target.shape)} (another --lora-r?)")
        shaped[model_key] = tensor.to(dtype=target.dtype)
    set_model_state_dict(module, shaped, options=StateDictOptions(full_state_dict=True, strict=False))
