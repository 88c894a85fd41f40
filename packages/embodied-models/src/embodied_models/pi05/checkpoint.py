"""Loading lerobot / openpi-PyTorch pi0.5 checkpoints through a declared key map with a strict report.

Source layouts (after an optional leading ``model.``, which lerobot hub checkpoints carry):

- lerobot ``PI05Pytorch`` / openpi ``PI0Pytorch(pi05=True)``: ``paligemma_with_expert.paligemma.model.*``
  (transformers >= 4.52 PaliGemma) or ``paligemma_with_expert.paligemma.{vision_tower,multi_modal_projector,
  language_model.model}.*`` (older transformers), ``paligemma_with_expert.gemma_expert.model.*``,
  ``action_in_proj``, ``action_out_proj``, ``time_mlp_in/out`` (old name ``action_time_mlp_in/out``).
- SigLIP keys with (transformers < 5.20) or without the inner ``vision_model.`` level.
- this package's own names (a checkpoint written by ``embodied train``).

Declared, never silent: ``lm_head.weight`` is the tied source of ``embed_tokens`` when a checkpoint has no
embedding table (lerobot hub files); the expert's ``lm_head`` and pi0's ``state_proj`` are known-unused.
Every other key either matches a rule or is reported as unexpected; every model key not filled is missing;
shape mismatches are reported. Any of the three is a CheckpointError unless allowed by a pattern.

The map is a :class:`embodied_core.checkpoint.keymap.KeyMap`; sources are found and read by core's
:func:`embodied_core.checkpoint.pretrained.resolve_weights` (guarded: a bad file is a CheckpointError naming it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import torch
from torch import nn

from embodied_core.checkpoint.keymap import KeyMap, LoadReport, Rename
from embodied_core.checkpoint.pretrained import resolve_weights
from embodied_models.pi05.config import Pi05ModelConfig
from embodied_models.pi05.reference import check_checkpoint_config
from embodied_models.vla.checkpoint import Globs, Source, load_mapped

__all__ = ["KEY_MAP", "KEY_RULES", "LoadReport", "load_pi05_checkpoint", "map_key", "read_checkpoint"]

_PG = r"paligemma_with_expert\.paligemma\."
_EX = r"paligemma_with_expert\.gemma_expert\."
KEY_RULES: tuple[tuple[str, str], ...] = (
    # vision tower (with or without the inner vision_model level; PaliGemma with or without .model)
    (_PG + r"(?:model\.)?vision_tower\.(?:vision_model\.)?(?P<rest>.+)", "vision_tower.{rest}"),
    (_PG + r"(?:model\.)?multi_modal_projector\.linear\.(?P<rest>.+)", "multi_modal_projector.{rest}"),
    (_PG + r"(?:model\.language_model\.|language_model\.model\.)embed_tokens\.weight", "embed_tokens.weight"),
    (_PG + r"(?:model\.language_model\.|language_model\.model\.)layers\.(?P<i>\d+)\.(?P<rest>.+)",
     "layers.{i}.vlm.{rest}"),
    (_PG + r"(?:model\.language_model\.|language_model\.model\.)norm\.weight", "vlm_norm.weight"),
    (_EX + r"model\.layers\.(?P<i>\d+)\.(?P<rest>.+)", "layers.{i}.expert.{rest}"),
    (_EX + r"model\.norm\.(?P<rest>.+)", "expert_norm.{rest}"),
    (r"(?:action_)?time_mlp_(?P<which>in|out)\.(?P<rest>.+)", "time_mlp_{which}.{rest}"),
    (r"action_(?P<which>in|out)_proj\.(?P<rest>.+)", "action_{which}_proj.{rest}"),
)
"""(source regex, target template), first match wins; a key matching none is unexpected."""

_OWN_PREFIXES = ("vision_tower.", "multi_modal_projector.", "embed_tokens.", "layers.", "vlm_norm.", "expert_norm.",
                 "action_in_proj.", "action_out_proj.", "time_mlp_in.", "time_mlp_out.")

KEY_MAP = KeyMap(
    strip_prefixes=("model.",),
    renames=tuple(Rename(pattern, template) for pattern, template in KEY_RULES),
    keep=tuple(f"{prefix}*" for prefix in _OWN_PREFIXES),
    # PaliGemma ties lm_head to embed_tokens: the head fills the embedding only when the table is absent
    tied=(Rename(_PG + r"(?:language_model\.)?lm_head\.weight", "embed_tokens.weight"),),
    ignored=("paligemma_with_expert.gemma_expert.lm_head.weight",  # the expert has no token head in pi0.5
             "state_proj.weight", "state_proj.bias"),  # pi0's state token; pi0.5 puts the state into the prompt
)
"""The declared map of every layout above onto :class:`~embodied_models.pi05.modeling.Pi05Model` names."""

_HINT = ("Allow known differences explicitly (allow_missing=/allow_unexpected=/allow_mismatched= glob patterns) or "
         "check model.* sizes against the checkpoint.")


def map_key(key: str) -> str | None:
    """Our parameter name for a source key, or None when no rule applies (our own names map to themselves)."""
    hit = KEY_MAP.target(key)
    return hit[0] if hit else None


def read_checkpoint(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Yields (key, tensor) of a checkpoint one tensor at a time (safetensors shards are read lazily)."""
    return resolve_weights(path).items()


def load_pi05_checkpoint(model: nn.Module, source: Source, *, allow_missing: Globs = (),
                         allow_unexpected: Globs = (), allow_mismatched: Globs = ()) -> LoadReport:
    """Copies a lerobot / openpi / own-layout checkpoint into ``model`` (a materialized Pi05Model), strictly;
    ``source``, the allow patterns, the report and the errors are those of
    :func:`~embodied_models.vla.checkpoint.load_mapped`, plus a ConfigError when a lerobot ``config.json`` beside
    the weights describes another network (:mod:`embodied_models.pi05.reference`)."""
    if not isinstance(source, Mapping) and isinstance(getattr(model, "config", None), Pi05ModelConfig):
        check_checkpoint_config(model.config, source)  # a lerobot config.json beside the weights must agree
    report, _ = load_mapped(model, source, KEY_MAP, label="pi0.5", hint=_HINT, allow_missing=allow_missing,
                            allow_unexpected=allow_unexpected, allow_mismatched=allow_mismatched)
    return report
