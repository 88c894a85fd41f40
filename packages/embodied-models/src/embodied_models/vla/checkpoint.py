"""The strict load tail every VLA port's checkpoint loader ends with: key map -> report -> strict check.

A port declares its :class:`~embodied_core.checkpoint.keymap.KeyMap` (and any check of its own, such as GR00T's
config.json sizes or X-VLA's tied tensors); this module reads the source (an in-memory state dict, or anything
:func:`~embodied_core.checkpoint.pretrained.resolve_weights` accepts) and copies it in strictly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from torch import nn

from embodied_core.checkpoint.keymap import Allow, KeyMap, LoadReport, load_state
from embodied_core.checkpoint.pretrained import resolve_weights

__all__ = ["Globs", "Source", "load_mapped"]

Source = str | Path | Mapping[str, torch.Tensor]
"""What a port's loader reads: a state dict, or a path ``resolve_weights`` accepts."""
Globs = Iterable[str]
"""Glob patterns of differences that are reported but not an error."""


def load_mapped(model: nn.Module, source: Source, keymap: KeyMap, *, label: str, hint: str, allow_missing: Globs = (),
                allow_unexpected: Globs = (), allow_mismatched: Globs = ()) -> tuple[LoadReport, str]:
    """Copies ``source`` into ``model`` through ``keymap`` (cast to each parameter's dtype), strictly.

    Args:
        model: the port's module (parameters materialized).
        source: an in-memory state dict, or anything
            :func:`~embodied_core.checkpoint.pretrained.resolve_weights` accepts (a file, a sharded safetensors folder
            with index, a lerobot folder with ``pretrained_model/``, an embodied run or checkpoint, a DCP
            checkpoint), read one tensor at a time.
        keymap: the port's declared key map.
        label: the port as errors name it (``"pi0.5"``): "<label> state dict" or "<label> checkpoint <where>".
        hint: the sentence appended to a strict-load error (how to fix a typical mismatch).
        allow_missing, allow_unexpected, allow_mismatched: glob patterns (over our names for missing and
            mismatched, over source names for unexpected) that are reported but not an error.

    Returns:
        The report and the name of what was loaded (for the caller's own follow-up errors). Raises CheckpointError
        listing every difference not covered by an allow pattern, or naming a file that cannot be read.
    """
    allow = Allow(missing=tuple(allow_missing), unexpected=tuple(allow_unexpected),
                  mismatched=tuple(allow_mismatched))
    if isinstance(source, Mapping):
        what = f"{label} state dict"
        return load_state(model, source, keymap, source=what, allow=allow, hint=hint), what
    weights = resolve_weights(source)
    what = f"{label} checkpoint {weights}"
    return load_state(model, weights.items(), keymap, source=what, allow=allow, hint=hint), what
