"""Loading official GR00T N1.6 / LoongForge / own-layout checkpoints through a declared key map with a strict report.

Source layouts:

- official GR00T N1.6 (Hugging Face folder such as nvidia/GR00T-N1.6-3B, ``config.json`` with
  ``model_type: Gr00tN1d6``, ``model.safetensors`` or shards with ``model.safetensors.index.json``): the
  ``Gr00tN1d6`` state dict, ``backbone.model.vision_model.vision_model.*`` (SigLIP2), ``backbone.model.mlp1.*``
  (projector), ``backbone.model.language_model.model.{embed_tokens,layers.N,norm}.*`` (Qwen3, only the kept
  layers), optionally ``backbone.model.language_model.lm_head.weight``, and ``action_head.*``;
- LoongForge's ``GrootN1d6Policy`` state dict: the same keys under ``model.`` (its loader strips that prefix too);
- this package's own names (a checkpoint written by ``embodied train``).

Declared, never silent: SigLIP2's attention-pooling ``head.*`` loads into ``backbone.vision.head.*`` (built, never
read, always frozen: ``model.vision_pooling_head``, default true, the official module); a checkpoint without it is a
strict-load error naming ``model.vision_pooling_head=false``, the setting that builds no head and drops a
checkpoint's head keys (listed as ignored); ``allow_missing=("backbone.vision.head.*",)`` instead keeps the head's
random initialization (it is never read). The LM head is dropped, and fills the token embedding only when a
checkpoint has no embedding table (Eagle's Qwen3 ties them). A
``config.json`` next to the weights must be GR00T N1.6's and agree with the model config on every size it states
(otherwise a CheckpointError names the ``model.x=...`` to set). Strict: anything missing, unexpected (a language
layer beyond ``model.select_layer``, for one) or mismatched is an error listing every key.
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

__all__ = ["KEY_MAP", "KEY_MAP_WITHOUT_POOLING_HEAD", "LoadReport", "config_disagreements", "key_map",
           "load_groot_n1_6_checkpoint", "map_key", "official_model_fields"]

OFFICIAL_MODEL_TYPE = "Gr00tN1d6"
_EAGLE = r"backbone\.model\."
_LLM = _EAGLE + r"language_model\.model\."
_POOLING_HEAD = "backbone.vision.head.*"
_OFFICIAL_POOLING_HEAD = "backbone.model.vision_model.vision_model.head.*"


def _key_rules(vision_parts: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return (
        (_EAGLE + r"vision_model\.vision_model\.(?P<rest>(?:" + "|".join(vision_parts) + r")\..+)",
         "backbone.vision.{rest}"),
        (_EAGLE + r"mlp1\.(?P<rest>.+)", "backbone.projector.{rest}"),
        (_LLM + r"embed_tokens\.weight", "backbone.embed_tokens.weight"),
        (_LLM + r"layers\.(?P<i>\d+)\.(?P<rest>.+)", "backbone.layers.{i}.{rest}"),
        (_LLM + r"norm\.weight", "backbone.norm.weight"),
    )


def _key_map(pooling_head: bool) -> KeyMap:
    parts = ("embeddings", "encoder", "post_layernorm", *(("head",) if pooling_head else ()))
    return KeyMap(
        strip_prefixes=("model.",),
        renames=tuple(Rename(pattern, template) for pattern, template in _key_rules(parts)),
        keep=("action_head.*", *(f"backbone.vision.{part}.*" for part in parts), "backbone.projector.*",
              "backbone.embed_tokens.*", "backbone.layers.*", "backbone.norm.*"),
        tied=(Rename(r"backbone\.model\.language_model\.lm_head\.weight", "backbone.embed_tokens.weight"),),
        ignored=() if pooling_head else (_OFFICIAL_POOLING_HEAD, _POOLING_HEAD),
    )


KEY_RULES: tuple[tuple[str, str], ...] = _key_rules(("embeddings", "encoder", "post_layernorm", "head"))
"""(source regex, target template) of the official module, first match wins; a key matching none (and no keep
glob) is unexpected."""

KEY_MAP = _key_map(pooling_head=True)
"""The declared map of every layout above onto :class:`~embodied_models.groot_n1_6.modeling.GrootN16Model` names
(the official module: SigLIP2's pooling head included)."""

KEY_MAP_WITHOUT_POOLING_HEAD = _key_map(pooling_head=False)
"""The map for ``model.vision_pooling_head=false``: a checkpoint's pooling-head keys (official or ours) are dropped
and listed as ignored."""


def key_map(config: Any) -> KeyMap:
    """The key map of a model section (:data:`KEY_MAP`, or :data:`KEY_MAP_WITHOUT_POOLING_HEAD` with
    ``model.vision_pooling_head=false``)."""
    return KEY_MAP if config.vision_pooling_head else KEY_MAP_WITHOUT_POOLING_HEAD


_HINT = ("Allow known differences explicitly (allow_missing=/allow_unexpected=/allow_mismatched= glob patterns), or "
         "check model.* against the checkpoint's config.json (model.select_layer keeps that many language layers).")

# config.json field of the official checkpoint (LoongForge's GrootN1d6ModelConfig names) -> model config field
_TOP_FIELDS = {"select_layer": "select_layer", "hidden_size": "hidden_size",
               "input_embedding_dim": "input_embedding_dim", "max_state_dim": "max_state_dim",
               "max_action_dim": "max_action_dim", "action_horizon": "action_horizon",
               "max_num_embodiments": "max_num_embodiments", "max_seq_len": "max_seq_len",
               "backbone_embedding_dim": "llm_width", "attend_text_every_n_blocks": "attend_text_every_n_blocks",
               "num_inference_timesteps": "num_inference_steps", "noise_beta_alpha": "noise_beta_alpha",
               "noise_beta_beta": "noise_beta_beta", "noise_s": "noise_s",
               "num_timestep_buckets": "num_timestep_buckets", "state_dropout_prob": "state_dropout_prob",
               "state_additive_noise_scale": "state_additive_noise_scale",
               "use_alternate_vl_dit": "use_alternate_vl_dit", "use_vlln": "use_vlln", "add_pos_embed": "add_pos_embed"}
_DIT_FIELDS = {"num_layers": "dit_num_layers", "num_attention_heads": "dit_num_heads",
               "attention_head_dim": "dit_head_dim", "output_dim": "hidden_size"}


def map_key(key: str) -> str | None:
    """Our parameter name for a source key, or None when no rule applies (our own names map to themselves)."""
    hit = KEY_MAP.target(key)
    return hit[0] if hit else None


def official_model_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The model config fields an official GR00T N1.6 ``config.json`` states (``model.<field>`` -> value)."""
    fields = {ours: doc[theirs] for theirs, ours in _TOP_FIELDS.items() if theirs in doc}
    sub = doc.get("diffusion_model_cfg") or {}
    fields.update({ours: sub[theirs] for theirs, ours in _DIT_FIELDS.items() if theirs in sub})
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
    candidate = folder / "config.json"
    return candidate if candidate.is_file() else None


def _check_config(model: nn.Module, source: Path) -> None:
    path = _config_file(source)
    if path is None:
        return
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("model_type") != OFFICIAL_MODEL_TYPE:
        return  # not an official GR00T N1.6 config (an embodied folder describes itself elsewhere)
    problems = config_disagreements(model.config, doc)
    if problems:
        raise CheckpointError(f"{path} describes another GR00T N1.6 size than the model: " + "; ".join(problems)
                              + "; set those model fields (or load a matching checkpoint)")


def load_groot_n1_6_checkpoint(model: nn.Module, source: Source, *, allow_missing: Globs = (),
                               allow_unexpected: Globs = (), allow_mismatched: Globs = ()) -> LoadReport:
    """Copies an official / LoongForge / own-layout checkpoint into ``model`` (a materialized GrootN16Model),
    strictly, through :func:`key_map` of its config; ``source``, the allow patterns, the report and the errors are
    those of :func:`~embodied_models.vla.checkpoint.load_mapped`, plus an error naming the config.json sizes next to
    a checkpoint file that disagree with the model, and ``model.vision_pooling_head=false`` when the checkpoint has
    no SigLIP2 pooling head for the model's."""
    if not isinstance(source, Mapping) and Path(source).exists():
        _check_config(model, Path(source))
    try:
        report, _ = load_mapped(model, source, key_map(model.config), label="GR00T N1.6", hint=_HINT,
                                allow_missing=allow_missing, allow_unexpected=allow_unexpected,
                                allow_mismatched=allow_mismatched)
    except CheckpointError as exc:
        if model.config.vision_pooling_head and "missing: backbone.vision.head." in str(exc):
            raise CheckpointError(f"{exc}\nThe checkpoint has no SigLIP2 attention-pooling head ({_POOLING_HEAD}, "
                                  "which Eagle never reads): set model.vision_pooling_head=false to build the model "
                                  "without it") from None
        raise
    return report
