"""The reference's X-VLA config read field by field: lerobot 0.6.1 ``XVLAConfig`` (what ``lerobot-train`` writes as
``pretrained_model/config.json``) and the Florence-2 config it carries (``florence_config``, in transformers' native
format or in the Microsoft remote-code format of the 2toINF checkpoints).

Every key is accounted for:

- mapped onto a ``model.*`` field (:data:`VISION_FIELDS`, :data:`TEXT_FIELDS`, :data:`POLICY_FIELDS`);
- fixed to the one value this port implements (:data:`VISION_FIXED`, :data:`TEXT_FIXED`, :data:`FLORENCE_FIXED`,
  :data:`POLICY_FIXED`): any other value is a ConfigError naming the key, its value and what is supported;
- not part of X-VLA's computation (the deleted BART decoder, weight init, generation and bookkeeping keys) or a
  setting of the run rather than of the network (:data:`NOT_USED`, :data:`RUN_KEYS`, each with its reason);
- a key in none of these tables is named in a warning (other lerobot / transformers versions write bookkeeping
  keys of their own, so it is not an error, but it may change the computation).

Absent keys take the reference's defaults (transformers' ``Florence2VisionConfig`` / ``BartConfig``, lerobot's
``XVLAConfig``), since the reference builds its model from the same partial dicts. A ``config.json`` next to
``--pretrained-checkpoint`` is read this way before anything is built, and the model config must agree with it on
every field that changes the computation (:data:`NOT_COMPARED` lists the fields a fine-tune may choose freely).
No torch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from embodied_models.vla.reference import (
    LEROBOT_HUB_KEYS,
    LEROBOT_OPTIMIZER_KEYS,
    LEROBOT_SCHEDULER_KEYS,
    checkpoint_config_checks,
    checkpoint_config_file,
    disagreements,
    fixed_problems,
    raise_problems,
    same,
    warn_unknown,
)

logger = logging.getLogger("embodied.models.xvla")

__all__ = ["FLORENCE_FIXED", "NOT_COMPARED", "NOT_USED", "POLICY_FIELDS", "POLICY_FIXED", "RUN_KEYS", "TEXT_FIELDS",
           "TEXT_FIXED", "VISION_FIELDS", "VISION_FIXED", "check_checkpoint_config", "checkpoint_config_file",
           "checkpoint_config_problems", "config_disagreements", "florence_model_fields", "is_reference_config",
           "reference_model_fields"]

VISION_FIELDS: dict[str, tuple[str, Any]] = {
    "embed_dim": ("vision_embed_dim", [128, 256, 512, 1024]),
    "depths": ("vision_depths", [1, 1, 9, 1]),
    "num_heads": ("vision_num_heads", [4, 8, 16, 32]),
    "num_groups": ("vision_num_groups", [4, 8, 16, 32]),
    "patch_size": ("vision_patch_size", [7, 3, 3, 3]),
    "patch_stride": ("vision_patch_stride", [4, 2, 2, 2]),
    "patch_padding": ("vision_patch_padding", [3, 1, 1, 1]),
    "patch_prenorm": ("vision_patch_prenorm", [False, True, True, True]),
    "window_size": ("vision_window_size", 12),
    "mlp_ratio": ("vision_mlp_ratio", 4.0),
    "drop_path_rate": ("vision_drop_path_rate", 0.1),
    "projection_dim": ("projection_dim", 1024),
    "max_position_embeddings": ("vision_max_position_embeddings", 50),
    "max_temporal_embeddings": ("vision_max_temporal_embeddings", 100),
}
"""``florence_config.vision_config`` key (native format) -> (``model.*`` field, transformers' default)."""

VISION_FIXED: dict[str, tuple[Any, ...]] = {
    "in_channels": (3,),
    "qkv_bias": (True,),
    "activation_function": ("gelu",),
    "model_type": ("davit", "florence_vision"),
    "image_feature_source": (["spatial_avg_pool", "temporal_avg_pool"],),
}
"""Vision keys with the values this port implements (the first is the reference's default)."""

TEXT_FIELDS: dict[str, tuple[str, Any]] = {
    "vocab_size": ("vocab_size", 50265),
    "d_model": ("text_width", 1024),
    "encoder_layers": ("text_depth", 12),
    "encoder_attention_heads": ("text_num_heads", 16),
    "encoder_ffn_dim": ("text_ffn_dim", 4096),
    "max_position_embeddings": ("text_max_position_embeddings", 1024),
    "dropout": ("text_dropout", 0.1),
    "attention_dropout": ("text_attention_dropout", 0.0),
    "activation_dropout": ("text_activation_dropout", 0.0),
    "scale_embedding": ("text_scale_embedding", False),
}
"""``florence_config.text_config`` key -> (``model.*`` field, ``BartConfig``'s default)."""

TEXT_ALIASES = {"hidden_size": "d_model", "num_hidden_layers": "encoder_layers",
                "num_attention_heads": "encoder_attention_heads"}
"""BART's attribute aliases, which older configs also write out: they must equal the key they alias."""

TEXT_FIXED: dict[str, tuple[Any, ...]] = {
    "activation_function": ("gelu",),
    "encoder_layerdrop": (0.0,),
    "pad_token_id": (1,),
    "bos_token_id": (0,),
    "eos_token_id": (2,),
    "model_type": ("bart", "florence2_language"),
}
"""Text keys with the values this port implements: exact GELU, no layer drop, BART's special ids (the built-in
tokenizers and the instruction padding use them)."""

FLORENCE_FIXED: dict[str, tuple[Any, ...]] = {
    "pad_token_id": (1,),
    "bos_token_id": (0,),
    "eos_token_id": (2,),
    "model_type": ("florence2",),
}
"""Top-level ``florence_config`` keys with the values this port implements."""

POLICY_FIELDS: dict[str, tuple[str, Any]] = {
    "hidden_size": ("hidden_size", 1024),
    "depth": ("depth", 24),
    "num_heads": ("num_heads", 16),
    "mlp_ratio": ("mlp_ratio", 4.0),
    "num_domains": ("num_domains", 30),
    "len_soft_prompts": ("len_soft_prompts", 32),
    "dim_time": ("dim_time", 32),
    "max_len_seq": ("max_len_seq", 512),
    "use_hetero_proj": ("use_hetero_proj", False),
    "action_mode": ("action_mode", "ee6d"),
    "num_denoising_steps": ("num_denoising_steps", 10),
    "use_proprio": ("use_proprio", True),
    "max_state_dim": ("max_state_dim", 32),
    "max_action_dim": ("max_action_dim", 20),
    "tokenizer_max_length": ("tokenizer_max_length", 64),
}
"""lerobot ``XVLAConfig`` key -> (``model.*`` field, lerobot's default)."""

POLICY_FIXED: dict[str, tuple[Any, ...]] = {
    "n_obs_steps": (1,),
    "tokenizer_padding_side": ("right",),
    "pad_language_to": ("max_length",),
}
"""lerobot ``XVLAConfig`` keys with the values this port implements (one observation step; the instruction
right-padded to ``tokenizer_max_length``)."""

RUN_KEYS: dict[str, str] = {
    "type": "the policy type ('xvla')",
    "chunk_size": "data.action_horizon",
    "n_action_steps": "embodied eval --replan-steps (a serve client executes what it chooses)",
    "normalization_mapping": "data.normalization",
    "tokenizer_name": "--tokenizer-path / data.tokenizer_path (a local folder)",
    "domain_feature_key": "data.domain_id_key",
    "resize_imgs_with_padding": "data.image_size (every view is resized)",
    "num_image_views": "data.num_image_views",
    "empty_cameras": "data.num_image_views beyond the cameras",
    "input_features": "data.camera_keys, data.state_key / data.state_dim",
    "output_features": "data.action_key / data.action_dim",
    "dtype": "--dtype",
    "device": "the trainer's device (one per rank)",
    "use_amp": "--dtype",
    "use_peft": "--use-lora / --lora-*",
    "freeze_vision_encoder": "--freeze-modules vlm.vision_tower",
    "freeze_language_encoder": "--freeze-modules vlm.language_model",
    "train_policy_transformer": "--freeze-modules transformer",
    "train_soft_prompts": "--freeze-modules transformer.soft_prompt_hub",
    **LEROBOT_OPTIMIZER_KEYS,
    "optimizer_soft_prompt_lr_scale": "--lr-group transformer.soft_prompt_hub=<LR>",
    "optimizer_soft_prompt_warmup_lr_scale": "--lr-group (no separate warm-up of the soft prompts' LR)",
    **LEROBOT_SCHEDULER_KEYS,
    **LEROBOT_HUB_KEYS,
}
"""lerobot ``XVLAConfig`` keys that configure the run, not the network: where our run config sets the same."""

_GENERIC = ("_name_or_path", "architectures", "transformers_version", "dtype", "torch_dtype", "return_dict",
            "output_attentions", "output_hidden_states", "chunk_size_feed_forward", "id2label", "label2id",
            "problem_type", "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads", "finetuning_task",
            "tokenizer_class", "prefix", "sep_token_id", "task_specific_params", "_commit_hash",
            "_attn_implementation_autoset", "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
            "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p",
            "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
            "bad_words_ids", "num_return_sequences", "output_scores", "return_dict_in_generate",
            "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
            "forced_bos_token_id", "forced_eos_token_id", "decoder_start_token_id", "is_decoder", "output_past",
            "add_cross_attention", "cross_attention_hidden_size", "tie_encoder_decoder", "num_labels")
_DECODER = ("decoder_layers", "decoder_ffn_dim", "decoder_attention_heads", "decoder_layerdrop", "use_cache")

NOT_USED: dict[str, str] = {
    **{key: "bookkeeping or generation setting of transformers' configs (no part of the encoder path)"
       for key in _GENERIC},
    **{key: "BART decoder (X-VLA deletes the decoder)" for key in _DECODER},
    "init_std": "weight init (the weights come from the checkpoint)",
    "initializer_range": "weight init (the weights come from the checkpoint)",
    "classifier_dropout": "BART's classification head (not built)",
    "is_encoder_decoder": "the decoder side (deleted)",
    "tie_word_embeddings": "the language-model head tied to the embeddings (deleted with the decoder)",
    "image_token_id": "Florence-2's image placeholder token (X-VLA prepends the image tokens itself)",
    "ignore_index": "the language-model loss (not used)",
    "enable_checkpoint": "DaViT activation recomputation (memory only)",
}
"""Keys that do not change X-VLA's computation, with the reason."""

NOT_COMPARED: dict[str, str] = {
    "text_dropout": "regularization of training (a fine-tune's choice)",
    "text_attention_dropout": "regularization of training (a fine-tune's choice)",
    "text_activation_dropout": "regularization of training (a fine-tune's choice)",
    "vision_drop_path_rate": "regularization of training (a fine-tune's choice)",
    "num_denoising_steps": "an inference setting",
    "tokenizer_max_length": "the instruction length of the run (BART's positions are checked)",
    "action_mode": "a fine-tune may train another action space of the same width (the strict load checks widths)",
    "max_action_dim": "the width of action_mode=auto (the strict load checks it)",
}
"""``model.*`` fields a checkpoint's config.json states that the model config may set differently."""


def _name(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _problem(where: str, key: str, value: Any, supported: tuple[Any, ...]) -> str:
    return fixed_problems({key: value}, {key: supported}, where)[0]


def _fixed(section: Mapping[str, Any], fixed: Mapping[str, tuple[Any, ...]], where: str) -> list[str]:
    return fixed_problems(section, fixed, where)


def _warn_unknown(section: Mapping[str, Any], known: set[str], where: str, source: str) -> None:
    warn_unknown(section, known, where=where, source=source, port="X-VLA", log=logger)


def _native_vision(vision: Mapping[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    """The remote-code vision keys in the native form lerobot translates them to (its ``_translate_vision_config``)."""
    out = dict(vision)
    if "dim_embed" in out:
        if "embed_dim" in out and not same(out["embed_dim"], out["dim_embed"]):
            problems.append(f"{where}.dim_embed {out['dim_embed']} and {where}.embed_dim {out['embed_dim']} differ")
        out["embed_dim"] = out.pop("dim_embed")
    pos = out.pop("image_pos_embed", None)
    if pos is not None:
        if not isinstance(pos, Mapping) or pos.get("type") != "learned_abs_2d":
            problems.append(_problem(where, "image_pos_embed.type", (pos or {}).get("type"), ("learned_abs_2d",)))
        elif "max_pos_embeddings" in pos:
            out["max_position_embeddings"] = pos["max_pos_embeddings"]
    temporal = out.pop("visual_temporal_embedding", None)
    if temporal is not None:
        if not isinstance(temporal, Mapping) or temporal.get("type") != "COSINE":
            problems.append(_problem(where, "visual_temporal_embedding.type", (temporal or {}).get("type"),
                                     ("COSINE",)))
        elif "max_temporal_embeddings" in temporal:
            out["max_temporal_embeddings"] = temporal["max_temporal_embeddings"]
    return out


def _section(doc: Mapping[str, Any], key: str, where: str, problems: list[str]) -> Mapping[str, Any]:
    value = doc.get(key)
    if not isinstance(value, Mapping):
        problems.append(f"{_name(where, key)} is required (a mapping; got {value!r})")
        return {}
    return value


def _mapped(section: Mapping[str, Any], table: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    return {field: section.get(key, default) for key, (field, default) in table.items()}


def _florence_fields(florence: Mapping[str, Any], where: str, problems: list[str], source: str) -> dict[str, Any]:
    vision_where, text_where = f"{where}.vision_config", f"{where}.text_config"
    vision = _native_vision(_section(florence, "vision_config", where, problems), vision_where, problems)
    text = _section(florence, "text_config", where, problems)
    problems += _fixed(vision, VISION_FIXED, vision_where)
    _warn_unknown(vision, set(VISION_FIELDS) | set(VISION_FIXED) | set(NOT_USED), vision_where, source)
    problems += _fixed(text, TEXT_FIXED, text_where)
    _warn_unknown(text, set(TEXT_FIELDS) | set(TEXT_FIXED) | set(TEXT_ALIASES) | set(NOT_USED), text_where, source)
    for alias, key in TEXT_ALIASES.items():
        if alias in text and not same(text[alias], text.get(key, TEXT_FIELDS[key][1])):
            problems.append(f"{text_where}.{alias} {text[alias]!r} differs from {text_where}.{key} "
                            f"{text.get(key, TEXT_FIELDS[key][1])!r} (BART reads {key})")
    problems += _fixed(florence, FLORENCE_FIXED, where)
    top = {"vision_config", "text_config", "projection_dim", "vocab_size"} | set(FLORENCE_FIXED) | set(NOT_USED)
    _warn_unknown(florence, top, where, source)
    fields = {**_mapped(vision, VISION_FIELDS), **_mapped(text, TEXT_FIELDS)}
    # the remote-code Florence2Config repeats these two at the top; the native classes read the sub-configs
    for key, field in (("projection_dim", "projection_dim"), ("vocab_size", "vocab_size")):
        if key in florence and not same(florence[key], fields[field]):
            problems.append(f"{where}.{key} {florence[key]!r} differs from the sub-config's {fields[field]!r}")
    return fields


def florence_model_fields(florence: Mapping[str, Any], *, source: str = "florence_config",
                          where: str = "florence_config") -> dict[str, Any]:
    """The ``model.*`` fields a Florence-2 config (native or remote-code format) sets, absent keys at the
    reference's defaults; ConfigError naming ``source`` and every key whose value this port does not implement."""
    problems: list[str] = []
    fields = _florence_fields(florence, where, problems, source)
    raise_problems(problems, source)
    return fields


def is_reference_config(doc: Mapping[str, Any]) -> bool:
    """Whether a config.json is the reference's X-VLA config (lerobot ``type: xvla`` or 2toINF ``model_type:
    xvla``), as opposed to another policy's or our own."""
    return doc.get("type") == "xvla" or doc.get("model_type") == "xvla"


def reference_model_fields(doc: Mapping[str, Any], *, source: str = "config.json") -> dict[str, Any]:
    """The ``model.*`` fields an X-VLA ``XVLAConfig`` document sets (its policy keys and its ``florence_config``),
    absent keys at the reference's defaults.

    Raises:
        ConfigError: naming ``source`` and every key whose value this port does not implement (keys it does not
            know are named in a warning).
    """
    problems: list[str] = []
    fields = _florence_fields(_section(doc, "florence_config", "", problems), "florence_config", problems, source)
    if not doc.get("florence_config"):
        raise_problems(problems, source)
    policy = _mapped(doc, POLICY_FIELDS)
    if isinstance(policy["action_mode"], str):
        policy["action_mode"] = policy["action_mode"].lower()  # lerobot lowercases it before use
    problems += _fixed(doc, POLICY_FIXED, "")
    known = set(POLICY_FIELDS) | set(POLICY_FIXED) | set(RUN_KEYS) | {"florence_config", "model_type"} | set(NOT_USED)
    _warn_unknown(doc, known, "", source)
    raise_problems(problems, source)
    return {**fields, **policy}


def config_disagreements(model_config: Any, fields: Mapping[str, Any]) -> list[str]:
    """``model.<field>`` lines where the reference's fields and the model config differ, for every field that changes
    the computation (not those of :data:`NOT_COMPARED`)."""
    return disagreements(model_config, fields, skip=NOT_COMPARED)


checkpoint_config_problems, check_checkpoint_config = checkpoint_config_checks(
    "X-VLA", policy_type="xvla", model_fields=reference_model_fields, not_compared=NOT_COMPARED)
