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
them). A ``config.json`` next to the weights must be GR00T N1.7's and agree with the model config on every size it
states (otherwise a CheckpointError names the ``model.x=...`` to set).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from embodied_core.checkpoint.keymap import KeyMap, LoadReport, Rename
from embodied_core.errors import CheckpointError
from embodied_models.vla.checkpoint import Globs, Source, load_mapped

__all__ = ["KEY_MAP", "LoadReport", "config_disagreements", "load_groot_checkpoint", "map_key",
           "official_model_fields"]

OFFICIAL_MODEL_TYPE = "Gr00tN1d7"
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

# config.json field of the official checkpoint -> model config field
_TOP_FIELDS = {"select_layer": "select_layer", "hidden_size": "hidden_size",
               "input_embedding_dim": "input_embedding_dim", "max_state_dim": "max_state_dim",
               "max_action_dim": "max_action_dim", "action_horizon": "action_horizon",
               "max_num_embodiments": "max_num_embodiments", "max_seq_len": "max_seq_len",
               "backbone_embedding_dim": "llm_width", "attend_text_every_n_blocks": "attend_text_every_n_blocks",
               "num_inference_timesteps": "num_inference_steps", "noise_beta_alpha": "noise_beta_alpha",
               "noise_beta_beta": "noise_beta_beta", "noise_s": "noise_s",
               "num_timestep_buckets": "num_timestep_buckets", "state_dropout_prob": "state_dropout_prob"}
_DIT_FIELDS = {"num_layers": "dit_num_layers", "num_attention_heads": "dit_num_heads",
               "attention_head_dim": "dit_head_dim", "output_dim": "hidden_size"}
_VL_FIELDS = {"num_layers": "vl_num_layers", "num_attention_heads": "vl_num_heads", "attention_head_dim": "vl_head_dim"}


def map_key(key: str) -> str | None:
    """Our parameter name for a source key, or None when no rule applies (our own names map to themselves)."""
    hit = KEY_MAP.target(key)
    return hit[0] if hit else None


def official_model_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The model config fields an official GR00T N1.7 ``config.json`` states (``model.<field>`` -> value)."""
    fields = {ours: doc[theirs] for theirs, ours in _TOP_FIELDS.items() if theirs in doc}
    for section, table in (("diffusion_model_cfg", _DIT_FIELDS), ("vl_self_attention_cfg", _VL_FIELDS)):
        sub = doc.get(section) or {}
        fields.update({ours: sub[theirs] for theirs, ours in table.items() if theirs in sub})
    return fields


def config_disagreements(model_config: Any, doc: Mapping[str, Any]) -> list[str]:
    """``model.<field>`` lines where an official config.json and the model config differ (empty when they agree)."""
    out = []
    for name, value in official_model_fields(doc).items():
        ours = getattr(model_config, name)
        if isinstance(ours, float) or isinstance(value, float):
            same = abs(float(ours) - float(value)) <= 1e-9 * max(1.0, abs(float(value)))
        else:
            same = ours == value
        if not same:
            out.append(f"model.{name}={value!r} (checkpoint) vs {ours!r} (model)")
    return out


def _config_file(source: Path) -> Path | None:
    folder = source if source.is_dir() else source.parent
    for candidate in (folder / "config.json", folder / "pretrained_model" / "config.json"):
        if candidate.is_file():
            return candidate
    return None


def _check_config(model: nn.Module, source: Path) -> None:
    path = _config_file(source)
    if path is None:
        return
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("model_type") != OFFICIAL_MODEL_TYPE:
        return  # not an official GR00T config (a lerobot or embodied folder describes itself elsewhere)
    problems = config_disagreements(model.config, doc)
    if problems:
        raise CheckpointError(f"{path} describes another GR00T N1.7 size than the model: " + "; ".join(problems)
                              + "; set those model fields (or load a matching checkpoint)")


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
