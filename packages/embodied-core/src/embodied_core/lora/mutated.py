"""PiSSA and OLoRA: initialisations that move part of each base weight into its adapter, stored as plain LoRA.

At injection PEFT sets ``A0, B0`` from an SVD (PiSSA) or QR (OLoRA) of ``W`` and replaces ``W`` by the residual
``W - s * B0 @ A0``. The base weights a checkpoint references are the original ``W``, so the trained ``(A, B)``
alone would be wrong against them. As PEFT does when asked to convert on save, checkpoints store the exact
equivalent plain LoRA of rank ``2r`` relative to ``W``: ``A' = [A; A0]``, ``B' = [B, -B0]`` with alpha ``2 alpha``
(the scale ``alpha / r`` is unchanged), since ``W + s B' A' = W - s B0 A0 + s B A``. Loading, merging and PEFT's own
``PeftModel.from_pretrained`` then need nothing special.

A resume splits ``A'``, ``B'`` back into the trained and the initial halves (exact slices), recomputes the
residual base from ``W`` with the same operations PEFT used (so it is bit-identical) and keeps training rank ``r``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import torch
from torch import nn

from embodied_core.errors import CheckpointError
from embodied_core.lora.state import ADAPTER_NAME, PEFT_PREFIX

if TYPE_CHECKING:
    from peft import LoraConfig

__all__ = ["capture_initial", "convert_state", "converted_config", "converted_shapes", "restore_residual",
           "split_state"]

Initial = dict[str, tuple[torch.Tensor, torch.Tensor]]


def _keys(path: str) -> tuple[str, str]:
    return f"{PEFT_PREFIX}{path}.lora_A.weight", f"{PEFT_PREFIX}{path}.lora_B.weight"


def capture_initial(layers: dict[str, nn.Module]) -> Initial:
    """Each adapted layer's ``(A0, B0)`` right after PEFT's initialisation (CPU copies)."""
    return {path: (layer.lora_A[ADAPTER_NAME].weight.detach().to("cpu", copy=True),
                   layer.lora_B[ADAPTER_NAME].weight.detach().to("cpu", copy=True))
            for path, layer in layers.items()}


def convert_state(state: dict[str, torch.Tensor], initial: Initial) -> dict[str, torch.Tensor]:
    """Trained rank-r adapters (PEFT file keys) -> the equivalent rank-2r adapters relative to the original base."""
    out = dict(state)
    for path, (a0, b0) in initial.items():
        key_a, key_b = _keys(path)
        out[key_a] = torch.cat([state[key_a], a0.to(state[key_a].dtype)], dim=0)
        out[key_b] = torch.cat([state[key_b], -b0.to(state[key_b].dtype)], dim=1)
    return out


def converted_shapes(shapes: dict[str, tuple[int, ...]], layers: list[str]) -> dict[str, tuple[int, ...]]:
    """The shapes :func:`convert_state` produces from the model's rank-r adapter shapes."""
    out = dict(shapes)
    for path in layers:
        key_a, key_b = _keys(path)
        out[key_a] = (2 * shapes[key_a][0], *shapes[key_a][1:])
        out[key_b] = (shapes[key_b][0], 2 * shapes[key_b][1], *shapes[key_b][2:])
    return out


def converted_config(config: LoraConfig) -> LoraConfig:
    """The PEFT config of the converted adapters: rank 2r, alpha 2 alpha, plain initialisation."""
    out = copy.deepcopy(config)
    out.r, out.lora_alpha, out.init_lora_weights = 2 * config.r, 2 * config.lora_alpha, True
    return out


def split_state(state: dict[str, torch.Tensor], layers: list[str], *, r: int,
                source: str) -> tuple[dict[str, torch.Tensor], Initial]:
    """Inverse of :func:`convert_state`: ``(trained rank-r adapters, initial (A0, B0) per layer)``."""
    trained = dict(state)
    initial: Initial = {}
    for path in layers:
        key_a, key_b = _keys(path)
        if key_a not in state or key_b not in state:
            raise CheckpointError(f"{source}: no adapter for the layer {path}")
        a, b = state[key_a], state[key_b]
        if a.shape[0] != 2 * r or b.shape[1] != 2 * r:
            raise CheckpointError(f"{source}: {key_a} is not a converted rank-{2 * r} adapter (shape "
                                  f"{tuple(a.shape)}); was the run trained with --lora-r {r}?")
        trained[key_a], trained[key_b] = a[:r].clone(), b[:, :r].clone()
        initial[path] = (a[r:].clone(), (-b[:, r:]).clone())
    return trained, initial


@torch.no_grad()
def restore_residual(layers: dict[str, nn.Module], initial: Initial) -> None:
    """Replaces each base weight ``W`` by ``W - s * B0 @ A0`` in float32, as PEFT's PiSSA / OLoRA init does."""
    for path, (a0, b0) in initial.items():
        layer = layers[path]
        weight = layer.get_base_layer().weight
        scaling = layer.scaling[ADAPTER_NAME]
        residual = weight.data.to(torch.float32) - scaling * b0.to(weight.device) @ a0.to(weight.device)
        weight.data = residual.to(weight.dtype)
