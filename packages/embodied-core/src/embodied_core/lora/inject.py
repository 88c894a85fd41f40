"""Adapters into the model itself with PEFT's tuner API (``inject_adapter_in_model``): no ``PeftModel`` wrapper.

The model keeps its class, ``forward``, ``sample_actions`` and protocol members; PEFT replaces each target layer
in place by a LoRA layer holding the original as ``base_layer``, freezes every other parameter, and wraps each
``modules_to_save`` module so that a trainable copy runs instead of the frozen original. What the run needs later
(checkpoint writer, resume, policy loading) is attached to the model as :class:`LoraState` (as PEFT attaches its
``peft_config``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import torch
from torch import nn

from embodied_core.errors import CheckpointError, ConfigError, EmbodiedError
from embodied_core.lora.base_ref import BaseReference
from embodied_core.lora.layout import ADAPTER_CONFIG
from embodied_core.lora.options import LoraSettings
from embodied_core.lora.state import ADAPTER_NAME
from embodied_core.lora.targets import (
    peft_target_modules,
    resolve_modules_to_save,
    split_frozen,
    target_problems,
)

if TYPE_CHECKING:
    from peft import LoraConfig

__all__ = ["LoraReport", "LoraState", "adapted_layers", "apply_lora", "attach_state",
           "inject_saved_adapters", "lora_state"]

_STATE_ATTR = "embodied_lora"


@attrs.define(kw_only=True)
class LoraState:
    """What a LoRA run keeps next to the model.

    Attributes:
        config: the PEFT config the adapters were injected with.
        base: where the base weights came from.
        targets: adapted module paths; modules_to_save: module paths trained in full.
        initial: for PiSSA / OLoRA, each adapted layer's initial ``(A0, B0)`` (the part moved out of the base
            weight), keyed by layer path; empty otherwise.
    """

    config: LoraConfig
    base: BaseReference
    targets: list[str]
    modules_to_save: list[str]
    initial: dict[str, tuple[torch.Tensor, torch.Tensor]] = attrs.field(factory=dict)

    @property
    def converted(self) -> bool:
        """Whether checkpoints store the adapters converted to a plain LoRA of rank 2r (PiSSA / OLoRA runs)."""
        return bool(self.initial)

    def training_record(self) -> dict[str, Any]:
        """The settings a resume must repeat, for ``lora_base.json``."""
        cfg = self.config
        return {"r": cfg.r, "lora_alpha": cfg.lora_alpha, "lora_dropout": cfg.lora_dropout, "bias": cfg.bias,
                "init_lora_weights": cfg.init_lora_weights, "target_modules": list(self.targets),
                "modules_to_save": list(self.modules_to_save), "converted_to_rank": 2 * cfg.r if self.converted
                else None}


@attrs.frozen
class LoraReport:
    """What :func:`apply_lora` did, for the log."""

    targets: list[str]
    skipped: list[str]
    modules_to_save: list[str]
    adapter_params: int
    trainable: int
    total: int
    where: str

    def __str__(self) -> str:
        save = f"; trained in full: {', '.join(self.modules_to_save)}" if self.modules_to_save else ""
        skipped = (f" ({len(self.skipped)} matched layer(s) the model freezes get none: {_shown(self.skipped)})"
                   if self.skipped else "")
        share = 100.0 * self.trainable / self.total if self.total else 0.0
        return (f"LoRA (PEFT) on {len(self.targets)} layer(s) from {self.where}{skipped}{save}: "
                f"{self.adapter_params:,} adapter parameters; {self.trainable:,} of {self.total:,} parameters "
                f"trainable ({share:.2f}%)")


def _shown(items: list[str], limit: int = 3) -> str:
    return ", ".join(items[:limit]) + (f" ... and {len(items) - limit} more" if len(items) > limit else "")


def attach_state(model: nn.Module, state: LoraState) -> None:
    """Keeps ``state`` on the model (an attribute, not a submodule: wrappers and state dicts ignore it)."""
    object.__setattr__(model, _STATE_ATTR, state)


def lora_state(model: nn.Module) -> LoraState | None:
    """The :class:`LoraState` of a model with adapters (None without)."""
    return model.__dict__.get(_STATE_ATTR)


def adapted_layers(model: nn.Module) -> dict[str, nn.Module]:
    """Path -> PEFT LoRA layer of every adapted module."""
    from peft.tuners.lora import LoraLayer

    return {name: module for name, module in model.named_modules() if isinstance(module, LoraLayer)}


def _inject(model: nn.Module, config: LoraConfig, expected: list[str]) -> None:
    from peft import inject_adapter_in_model

    try:
        inject_adapter_in_model(config, model, adapter_name=ADAPTER_NAME)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise EmbodiedError(f"--use-lora: PEFT could not inject the adapters into {type(model).__name__}: {exc}") \
            from None
    got = sorted(adapted_layers(model))
    if got != sorted(expected):
        raise EmbodiedError(f"--use-lora: PEFT adapted {len(got)} layer(s), {len(expected)} were resolved; "
                            f"differences: {sorted(set(got) ^ set(expected))[:5]}")


def apply_lora(model: nn.Module, settings: LoraSettings, *, init: bool | str | None = None) -> tuple[LoraConfig,
                                                                                                  LoraReport]:
    """Injects adapters per ``settings`` into ``model`` (in place) and freezes everything else.

    Args:
        init: overrides ``settings.init`` (a resume of a PiSSA / OLoRA run injects with ``False`` and restores the
            residual base itself).

    Raises:
        ConfigError: a target or module-to-save name matches nothing, or matches a layer LoRA cannot adapt.
    """
    from peft import LoraConfig

    targets, problems = target_problems(model, settings.targets)
    targets, skipped = split_frozen(model, targets)
    if skipped and not targets and not problems:
        problems.append(f"{settings.targets.describe()}: every matched layer is frozen by the model itself (no loss "
                        f"reaches {_shown(skipped)}); target other layers")
    to_save: list[str] = []
    try:
        to_save = resolve_modules_to_save(model, settings.modules_to_save, targets)
    except ConfigError as exc:
        problems.extend(exc.problems)
    if problems:  # every target and module-to-save mistake in one message
        raise ConfigError(problems, source="--use-lora")
    config = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                        target_modules=peft_target_modules(model, targets), modules_to_save=to_save or None,
                        bias=settings.bias, init_lora_weights=settings.init if init is None else init)
    _inject(model, config, targets)
    config = model.peft_config[ADAPTER_NAME]  # PEFT may have condensed target_modules to shorter suffixes
    config.init_lora_weights = settings.init  # what the run uses, also when a resume injected without it
    layers = adapted_layers(model)
    adapter_params = sum(p.numel() for layer in layers.values() for n, p in layer.named_parameters()
                         if "lora_" in n)
    report = LoraReport(targets=targets, skipped=skipped, modules_to_save=to_save, adapter_params=adapter_params,
                        trainable=sum(p.numel() for p in model.parameters() if p.requires_grad),
                        total=sum(p.numel() for p in model.parameters()),
                        where=settings.targets.describe())
    return config, report


def inject_saved_adapters(model: nn.Module, directory: Path) -> LoraConfig:
    """Injects the (untrained) adapters that ``directory/adapter_config.json`` describes, for loading them.

    Raises:
        CheckpointError: the file is missing, not a LoRA config of PEFT, or its targets do not fit the model.
    """
    from peft import LoraConfig

    source = Path(directory) / ADAPTER_CONFIG
    if not source.is_file():
        raise CheckpointError(f"{source}: file is missing")
    try:
        config = LoraConfig.from_pretrained(str(directory))
    except Exception as exc:  # foreign or corrupt files: name the file instead of a traceback
        raise CheckpointError(f"{source}: not a PEFT LoRA config ({type(exc).__name__}: {exc})") from None
    config.inference_mode = False
    config.init_lora_weights = True  # plain init: the trained values are loaded next (never PiSSA on load)
    from peft import inject_adapter_in_model

    try:
        inject_adapter_in_model(config, model, adapter_name=ADAPTER_NAME)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{source}: its adapters do not fit {type(model).__name__}: {exc}") from None
    return model.peft_config[ADAPTER_NAME]
