"""The ``lora`` checkpoint format: the adapters in PEFT's format plus a reference to the base, and the training state.

Saving gathers only the adapter tensors (every rank takes part under FSDP; rank 0 writes); ``training_state/`` is
that of the single-file formats (one optimizer file, or one per rank under ZeRO-1). Resuming checks the adapter
file against the model's LoRA layers, loads the adapters (each rank keeps its shard), then optimizer, scheduler,
RNG and data position. A run uses this format whenever ``--use-lora`` is on.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from embodied_core.checkpoint.contract import CheckpointFormat, ResumeState
from embodied_core.checkpoint.file_format import FileCheckpointWriter, check_training_state, restore_training_state
from embodied_core.checkpoint.readers import read_json, read_tensors, safetensors_shapes
from embodied_core.distributed.base import DistributedStrategy
from embodied_core.errors import CheckpointError
from embodied_core.lora.base_ref import read_lora_record, write_lora_record
from embodied_core.lora.inject import LoraState, lora_state
from embodied_core.lora.layout import ADAPTER_CONFIG, ADAPTER_WEIGHTS, BASE_FILE, LORA_FORMAT_NAME
from embodied_core.lora.mutated import convert_state, converted_config, converted_shapes, split_state
from embodied_core.lora.state import adapter_shapes, adapter_state_dict, load_adapter_state_dict

__all__ = ["LORA_FORMAT", "LoraCheckpointWriter", "write_adapter_files"]


def _state_of(module: nn.Module, *, where: str) -> LoraState:
    state = lora_state(module)
    if state is None:
        raise CheckpointError(f"{where}: the model has no LoRA adapters (the run was built without --use-lora)")
    return state


def write_adapter_files(directory: Path, tensors: dict[str, torch.Tensor], state: LoraState) -> None:
    """Writes ``adapter_model.safetensors``, ``adapter_config.json`` and ``lora_base.json`` into ``directory``.

    ``tensors`` are the trained adapters (PEFT file keys); PiSSA / OLoRA adapters are converted here.
    """
    config = state.config
    if state.converted:
        tensors, config = convert_state(tensors, state.initial), converted_config(config)
    save_file(tensors, str(directory / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    config = copy.copy(config)  # as PeftModel.save_pretrained writes it: inference mode, the base it adapts
    config.base_model_name_or_path, config.inference_mode = state.base.path, True
    if isinstance(config.target_modules, set):  # PEFT keeps a set; sorted, the file is the same on every save
        config.target_modules = sorted(config.target_modules)
    config.save_pretrained(str(directory))
    write_lora_record(directory, state.base, state.training_record())


class LoraCheckpointWriter(FileCheckpointWriter):
    """The single-file writer with the adapters (and their config and base reference) instead of the model."""

    def write_weights(self, model: nn.Module, directory: Path) -> None:
        """Gathers the adapters (collective) and, on rank 0, writes the adapter files."""
        state = _state_of(self.strategy.unwrap_model(model), where=str(directory))
        tensors = adapter_state_dict(model, self.strategy)
        if self.strategy.is_main:
            write_adapter_files(directory, tensors, state)


def check_files(path: Path, meta: dict[str, Any], strategy: DistributedStrategy) -> None:
    """Adapter files readable, the run is a LoRA run, and the training state complete."""
    if not strategy.args.use_lora:
        raise CheckpointError(f"{path} holds LoRA adapters (saved with --use-lora); resume it with --use-lora and the "
                              "LoRA flags it was trained with, or merge it first (embodied checkpoint merge-lora)")
    model_shapes(path, meta)
    read_json(path / ADAPTER_CONFIG)
    read_lora_record(path)
    check_training_state(path, meta, strategy)


def model_shapes(path: Path, meta: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """PEFT key -> shape of the stored adapters (the safetensors header)."""
    return safetensors_shapes(path / ADAPTER_WEIGHTS)


def expected_shapes(module: nn.Module) -> dict[str, tuple[int, ...]]:
    """The adapter shapes the writer stores for ``module`` (rank 2r for converted PiSSA / OLoRA adapters)."""
    state = _state_of(module, where="checking the checkpoint")
    shapes = adapter_shapes(module)
    return converted_shapes(shapes, list(state.initial)) if state.converted else shapes


def restore(path: Path, meta: dict[str, Any], strategy: DistributedStrategy, *, model: nn.Module,
            optimizer: torch.optim.Optimizer, scheduler: Any) -> ResumeState:
    """Loads the adapters, then optimizer, scheduler and this rank's state."""
    state = _state_of(strategy.unwrap_model(model), where=str(path))
    base, _ = read_lora_record(path)
    if base.path != state.base.path:
        raise CheckpointError(f"{path / BASE_FILE}: the adapters were trained on {base.path}, this run's base is "
                              f"{state.base.path}")
    tensors = read_tensors(path / ADAPTER_WEIGHTS)
    if state.converted:
        tensors, _ = split_state(tensors, list(state.initial), r=state.config.r, source=str(path / ADAPTER_WEIGHTS))
    load_adapter_state_dict(model, tensors, strategy, source=str(path / ADAPTER_WEIGHTS))
    return restore_training_state(path, strategy, model=model, optimizer=optimizer, scheduler=scheduler)


LORA_FORMAT = CheckpointFormat(names=(LORA_FORMAT_NAME,), writer=LoraCheckpointWriter, check_files=check_files,
                               model_shapes=model_shapes, restore=restore, expected_shapes=expected_shapes)
"""LoRA runs (``--use-lora``): ``adapter_model.safetensors`` + ``adapter_config.json`` + ``lora_base.json``."""
