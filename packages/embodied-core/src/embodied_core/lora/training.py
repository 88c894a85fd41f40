"""``--use-lora`` in the trainer: the base weights, the adapters, and what a resume must find again.

Called by :meth:`~embodied_core.trainer.base.BaseTrainer.prepare_model` on the freshly built model, before
``--freeze-modules`` and before the strategy wraps it:

1. the base weights: ``--pretrained-checkpoint``; or, resuming, the base the checkpoint references (the same
   ``--pretrained-checkpoint`` or the run's own initial weights); or, for a run without one, the model's own
   initialisation, written once to ``<output-dir>/lora_base/model.safetensors`` so that every checkpoint can
   reference real files;
2. the adapters (PEFT), which freezes the base; a resume of a PiSSA / OLoRA run restores the residual base;
3. the :class:`~embodied_core.lora.inject.LoraState` on the model, which the LoRA checkpoint format reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from embodied_core.checkpoint.readers import read_tensors
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import CheckpointError
from embodied_core.lora.base_ref import (
    BaseReference,
    initial_reference,
    pretrained_reference,
    read_lora_record,
    write_initial_base,
)
from embodied_core.lora.inject import LoraReport, LoraState, adapted_layers, apply_lora, attach_state
from embodied_core.lora.layout import ADAPTER_WEIGHTS, BASE_FILE, INITIAL_BASE
from embodied_core.lora.mutated import capture_initial, restore_residual, split_state
from embodied_core.lora.options import LoraSettings

__all__ = ["check_resume_settings", "setup_lora"]

logger = logging.getLogger("embodied.train")

_FLAGS = {"r": "--lora-r", "lora_alpha": "--lora-alpha", "lora_dropout": "--lora-dropout", "bias": "--lora-bias",
          "init_lora_weights": "--lora-init", "target_modules": "--lora-target-modules",
          "modules_to_save": "--lora-modules-to-save"}


def check_resume_settings(saved: dict, current: dict, *, source: Path) -> None:
    """Raises CheckpointError naming each LoRA flag whose value differs from the one the checkpoint was trained with."""
    diffs = [f"{_FLAGS[key]}: checkpoint {saved.get(key)!r}, this run {value!r}" for key, value in current.items()
             if key in _FLAGS and saved.get(key) != value]
    if diffs:
        raise CheckpointError(f"{source}: the LoRA settings differ from the checkpoint's ({'; '.join(diffs)}); a "
                              "resume continues the same adapters, so repeat the flags it was trained with")


def _resume_base(args: TrainingArgs, resume_path: Path) -> BaseReference:
    base, _ = read_lora_record(resume_path)
    source = resume_path / BASE_FILE
    if args.pretrained_checkpoint:
        given = pretrained_reference(args.pretrained_checkpoint)
        if base.kind != "pretrained" or Path(base.path) != Path(given.path):
            raise CheckpointError(f"{source}: the adapters were trained on {base.path}, but --pretrained-checkpoint "
                                  f"is {given.path}; resume with the same base (or without --pretrained-checkpoint)")
    return base


def setup_lora(model: nn.Module, args: TrainingArgs, *, output_dir: Path, is_main: bool, resume_path: Path | None,
               load_pretrained: Callable[[nn.Module, str], None]) -> LoraReport:
    """Loads the base, injects the adapters and attaches the run's :class:`LoraState` (see the module docstring).

    Args:
        resume_path: the checkpoint being resumed (None for a fresh run).
        load_pretrained: the trainer's loader of ``--pretrained-checkpoint`` (the model's key map, strict report).

    Raises:
        ConfigError: a target or module-to-save name matches nothing.
        CheckpointError: resuming with other LoRA flags or another base, or a base that changed on disk.
    """
    settings = LoraSettings.from_args(args)
    if resume_path is not None:
        base = _resume_base(args, resume_path)
        if base.kind == "pretrained":
            base.check_unchanged(source=resume_path / BASE_FILE)
            load_pretrained(model, base.path)
        else:
            base.load_into(model, source=resume_path / BASE_FILE)
    elif args.pretrained_checkpoint:
        load_pretrained(model, args.pretrained_checkpoint)
        base = pretrained_reference(args.pretrained_checkpoint)
    else:
        if is_main:
            path = write_initial_base(model, output_dir)
            logger.info("--use-lora without --pretrained-checkpoint: the initial base weights are in %s", path)
        base = initial_reference(output_dir) if is_main else _initial_placeholder(output_dir)
    resume_mutated = resume_path is not None and settings.mutates_base
    config, report = apply_lora(model, settings, init=False if resume_mutated else None)
    _trainable_in_fp32(model)
    state = LoraState(config=config, base=base, targets=report.targets, modules_to_save=report.modules_to_save)
    if resume_path is not None:
        _, saved = read_lora_record(resume_path)
        check_resume_settings(saved, state.training_record(), source=resume_path / BASE_FILE)
    layers = adapted_layers(model)
    if resume_mutated:
        stored = read_tensors(resume_path / ADAPTER_WEIGHTS)
        _, state.initial = split_state(stored, list(layers), r=config.r, source=str(resume_path / ADAPTER_WEIGHTS))
        restore_residual(layers, state.initial)
    elif settings.mutates_base:
        state.initial = capture_initial(layers)
    attach_state(model, state)
    return report


def _trainable_in_fp32(model: nn.Module) -> None:
    """Adapters, modules trained in full and trainable biases hold fp32 master weights, also on a low-precision
    base: PEFT makes new adapters fp32 but copies modules_to_save in the base's dtype, and FSDP2 needs one dtype
    across a unit's trainable parameters. Compute still runs in ``--dtype`` (autocast / FSDP's policy)."""
    for param in model.parameters():
        if param.requires_grad and param.is_floating_point() and param.dtype != torch.float32:
            param.data = param.data.float()


def _initial_placeholder(output_dir: Path) -> BaseReference:
    """Ranks other than 0 never write checkpoint files; they only need to know where the base is."""
    return BaseReference(kind="initial", path=str((output_dir / INITIAL_BASE).resolve()), files={})
