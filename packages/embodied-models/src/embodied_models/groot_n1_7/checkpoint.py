"""Loading official GR00T N1.7 / lerobot / own-layout checkpoints through a declared key map with a strict report.

Source layouts:

- official GR00T N1.7 (Hugging Face folder, ``config.json`` with ``model_type: Gr00tN1d7``, ``model.safetensors``
  or shards with ``model.safetensors.index.json``): ``backbone.model.model.visual.*`` and
  ``backbone.model.model.language_model.{embed_tokens,layers.N,norm}.*`` (the Qwen3-VL wrapper inside
  Isaac-GR00T's ``Qwen3Backbone``; ``backbone.model.visual.*`` / ``backbone.model.language_model.*`` without the
  inner ``model.`` level are accepted too), optionally ``backbone.model.lm_head.weight``, and ``action_head.*``;
- lerobot 0.6 ``GrootPolicy`` (``model.safetensors`` of a policy folder, also under ``pretrained_model/``): the
  same keys under ``_groot_model.``;
- a bare action-head ``state_dict()`` (lerobot ``GR00TN17ActionHead``, e.g. the golden fixture): its keys become
  ``action_head.*``; the backbone is then missing, so allow it explicitly (``allow_missing=("backbone.*",)``);
- this package's own names (a checkpoint written by ``embodied train``).

Declared, never silent: the language model's final ``norm`` is dropped (GR00T reads the last kept layer before
it); ``lm_head.weight`` fills the token embedding only when a checkpoint has no embedding table (Cosmos-Reason2 ties
them). A reference ``config.json`` next to the weights (the official ``Gr00tN1d7`` one or lerobot's ``groot`` policy
config) must agree with the model config on every field it states and use only settings this port implements
(:mod:`~embodied_models.groot_n1_7.reference`; otherwise a CheckpointError names each key or ``model.x=...``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from embodied_core.checkpoint.keymap import KeyMap, LoadReport, Rename
from embodied_core.errors import CheckpointError
from embodied_models.groot_n1_7.reference import (
    DIT_FIELDS,
    MODEL_FIELDS,
    NOT_COMPARED,
    OFFICIAL_MODEL_TYPE,  # re-exported: its old home
    VL_FIELDS,
    checkpoint_config_problems,
)
from embodied_models.vla.checkpoint import Globs, Source, load_mapped
from embodied_models.vla.reference import disagreements

__all__ = ["KEY_MAP", "OFFICIAL_MODEL_TYPE", "LoadReport", "config_disagreements", "load_groot_checkpoint",
           "map_key", "official_model_fields"]

_QWEN = r"backbone\.model\.(?:model\.)?"
_HEAD_PARTS = r"(?:model|state_encoder|action_encoder|action_decoder|vlln|vl_self_attention|position_embedding)"
KEY_RULES: tuple[tuple[str, str], ...] = (
    (_QWEN + r"visual\.(?P<rest>.+)", "backbone.visual.{rest}"),
    (_QWEN + r"language_model\.embed_tokens\.weight", "backbone.embed_tokens.weight"),
    (_QWEN + r"language_model\.layers\.(?P<i>\d+)\.(?P<rest>.+)", "backbone.layers.{i}.{rest}"),
    (r"(?P<rest>" + _HEAD_PARTS + r"\..+)", "action_head.{rest}"),
)
"""(source regex, target template), first match wins; a key matching none (and no keep glob) is unexpected."""

KEY_MAP = KeyMap(
    strip_prefixes=("_groot_model.",),
    renames=tuple(Rename(pattern, template) for pattern, template in KEY_RULES),
    keep=("action_head.*", "backbone.visual.*", "backbone.embed_tokens.*", "backbone.layers.*"),
    tied=(Rename(r"backbone\.model\.lm_head\.weight", "backbone.embed_tokens.weight"),),
    ignored=("backbone.model.model.language_model.norm.weight", "backbone.model.language_model.norm.weight"),
)
"""The declared map of every layout above onto :class:`~embodied_models.groot_n1_7.modeling.GrootN17Model` names."""

_HINT = ("Allow known differences explicitly (allow_missing=/allow_unexpected=/allow_mismatched= glob patterns), or "
         "check model.* against the checkpoint's config.json (model.select_layer keeps that many language layers).")



def map_key(key: str) -> str | None:
    """Our parameter name for a source key, or None when no rule applies (our own names map to themselves)."""
    hit = KEY_MAP.target(key)
    return hit[0] if hit else None


def official_model_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The model config fields an official GR00T N1.7 ``config.json`` states (``model.<field>`` -> value), by the
    tables of :mod:`~embodied_models.groot_n1_7.reference` (its fixed keys are not checked here)."""
    fields = {ours: doc[theirs] for theirs, ours in MODEL_FIELDS.items() if theirs in doc}
    for section, table in (("diffusion_model_cfg", DIT_FIELDS), ("vl_self_attention_cfg", VL_FIELDS)):
        sub = doc.get(section) or {}
        fields.update({ours: sub[theirs] for theirs, ours in table.items() if theirs in sub})
    return fields


def config_disagreements(model_config: Any, doc: Mapping[str, Any]) -> list[str]:
    """``model.<field>`` lines where an official config.json and the model config differ (empty when they agree;
    the fields of ``reference.NOT_COMPARED`` are a fine-tune's choice)."""
    return disagreements(model_config, official_model_fields(doc), skip=NOT_COMPARED)


def _check_config(model: nn.Module, source: Path) -> None:
    problems = checkpoint_config_problems(model.config, source)
    if problems:
        raise CheckpointError("; ".join(problems))


def load_groot_checkpoint(model: nn.Module, source: Source, *, allow_missing: Globs = (),
                          allow_unexpected: Globs = (), allow_mismatched: Globs = ()) -> LoadReport:
    """Copies an official / lerobot / action-head-only / own-layout checkpoint into ``model`` (a materialized
    GrootN17Model), strictly; ``source``, the allow patterns, the report and the errors are those of
    :func:`~embodied_models.vla.checkpoint.load_mapped`, plus an error naming the config.json sizes next to a
    checkpoint file that disagree with the model."""
    if not isinstance(source, Mapping) and Path(source).exists():
        _check_config(model, Path(source))
    report, _ = load_mapped(model, source, KEY_MAP, label="GR00T N1.7", hint=_HINT, allow_missing=allow_missing,
                            allow_unexpected=allow_unexpected, allow_mismatched=allow_mismatched)
    return report
