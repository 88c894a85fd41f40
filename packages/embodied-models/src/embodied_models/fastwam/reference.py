"""lerobot 0.6.1's ``FastWAMConfig`` read field by field (what ``lerobot-train`` writes as ``pretrained_model/
config.json``, e.g. ``lerobot/fastwam_base``), with the ``video_dit_config`` / ``action_dit_config`` dicts it passes
to ``WanVideoDiT`` / ``ActionDiT`` and its scheduler and loss dicts.

Every key is mapped onto a ``model.*`` field (:data:`TOP_FIELDS`, :data:`VIDEO_FIELDS`, :data:`ACTION_FIELDS`,
:data:`SCHEDULER_FIELDS`, :data:`LOSS_FIELDS`), fixed to the values this port implements (:data:`FIXED`,
:data:`VIDEO_FIXED`: another value is a ConfigError naming the key), or a setting of the run or of the data section
(:data:`RUN_KEYS`, :data:`VIDEO_RUN_KEYS`, :data:`ACTION_RUN_KEYS`, with where ours sets it); anything else is named in
a warning. Absent keys take lerobot's defaults, as lerobot builds its config from the same partial document.

A ``config.json`` beside ``--pretrained-checkpoint`` is read this way before anything is built: the model config must
agree with it on every field that defines the network or its timestep scale (:data:`NOT_COMPARED` lists the training
and sampling choices a run may make differently). The README's "Reference fields" table is the same content. No
torch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from embodied_models.vla.reference import (
    checkpoint_config_checks,
    fixed_problems,
    raise_problems,
    same,
    warn_unknown,
)

__all__ = ["ACTION_FIELDS", "FIXED", "LOSS_FIELDS", "NOT_COMPARED", "RUN_KEYS", "SCHEDULER_FIELDS", "TOP_FIELDS",
           "VIDEO_FIELDS", "VIDEO_FIXED", "check_checkpoint_config", "checkpoint_config_problems",
           "reference_model_fields"]

logger = logging.getLogger("embodied.models.fastwam")

TOP_FIELDS: dict[str, tuple[str, Any]] = {
    "num_inference_steps": ("num_inference_steps", 10),
    "inference_seed": ("inference_seed", 42),
    "rand_device": ("rand_device", "cpu"),
    "fp32_attention": ("fp32_attention", True),
    "use_gradient_checkpointing": ("gradient_checkpointing", False),
}
"""``FastWAMConfig`` key -> (``model.*`` field, lerobot's default); ``proprio_dim`` and ``sigma_shift`` are read
separately (``model.use_proprio``, ``model.action_infer_shift``)."""

VIDEO_FIELDS: dict[str, tuple[str, Any]] = {
    "patch_size": ("patch_size", [1, 2, 2]), "in_dim": ("in_channels", 48), "out_dim": ("out_channels", 48),
    "hidden_dim": ("video_hidden_dim", 3072), "ffn_dim": ("video_ffn_dim", 14336), "freq_dim": ("video_freq_dim", 256),
    "text_dim": ("text_dim", 4096), "num_heads": ("num_heads", 24), "attn_head_dim": ("attn_head_dim", 128),
    "num_layers": ("num_layers", 30), "eps": ("eps", 1e-6),
    "video_attention_mask_mode": ("video_attention_mask_mode", "first_frame_causal"),
}
"""``video_dit_config`` key -> (``model.*`` field, lerobot's ``default_video_dit_config``)."""

ACTION_FIELDS: dict[str, tuple[str, Any]] = {
    "hidden_dim": ("action_hidden_dim", 1024), "ffn_dim": ("action_ffn_dim", 4096),
    "freq_dim": ("action_freq_dim", 256), "text_dim": ("text_dim", 4096), "num_heads": ("num_heads", 24),
    "attn_head_dim": ("attn_head_dim", 128), "num_layers": ("num_layers", 30), "eps": ("eps", 1e-6),
}
"""``action_dit_config`` key -> (``model.*`` field, lerobot's ``default_action_dit_config``); the fields it shares
with the video expert are one field here and must be equal."""

SCHEDULER_FIELDS: dict[str, dict[str, tuple[str, Any]]] = {
    "video_scheduler": {"train_shift": ("video_train_shift", 5.0), "infer_shift": ("video_infer_shift", 5.0),
                        "num_train_timesteps": ("num_train_timesteps", 1000)},
    "action_scheduler": {"train_shift": ("action_train_shift", 5.0), "infer_shift": ("action_infer_shift", 5.0),
                         "num_train_timesteps": ("num_train_timesteps", 1000)},
}
LOSS_FIELDS: dict[str, tuple[str, Any]] = {"lambda_video": ("lambda_video", 1.0),
                                           "lambda_action": ("lambda_action", 1.0)}

FIXED: dict[str, tuple[Any, ...]] = {"tiled": (False,)}
"""``FastWAMConfig`` keys with the values this port implements (lerobot's VAE adapter refuses tiling too)."""

VIDEO_FIXED: dict[str, tuple[Any, ...]] = {
    "action_conditioned": (False,), "seperated_timestep": (True,), "has_image_input": (False,),
    "has_image_pos_emb": (False,), "has_ref_conv": (False,), "add_control_adapter": (False,),
    "require_clip_embedding": (False,), "require_vae_embedding": (False,), "fuse_vae_embedding_in_latents": (True,),
}
"""``video_dit_config`` keys with the values this port implements (lerobot refuses the others of these too, except
``action_conditioned``, which is not ported)."""

VIDEO_RUN_KEYS = {"action_dim": "data.action_dim (read by lerobot only with action_conditioned)",
                  "action_group_causal_mask_mode": "read only with action_conditioned",
                  "in_dim_control_adapter": "deleted unread by lerobot",
                  "use_gradient_checkpointing": "the top-level use_gradient_checkpointing (lerobot overwrites it)",
                  "fp32_attention": "the top-level fp32_attention (lerobot overwrites it)"}
ACTION_RUN_KEYS = {"action_dim": "data.action_dim / data.max_action_dim",
                   "use_gradient_checkpointing": VIDEO_RUN_KEYS["use_gradient_checkpointing"],
                   "fp32_attention": VIDEO_RUN_KEYS["fp32_attention"]}

RUN_KEYS: dict[str, str] = {
    "type": "the policy type ('fastwam')", "action_dim": "data.action_dim / data.max_action_dim",
    "action_horizon": "data.action_horizon", "n_action_steps": "embodied eval --replan-steps",
    "num_video_frames": "data.num_video_frames with data.frame_window_mode=lerobot",
    "action_video_freq_ratio": "data.action_video_freq_ratio", "image_size": "data.image_size (per camera here)",
    "context_len": "declared, never read by lerobot", "tokenizer_max_len": "data.text_len",
    "prompt_template": "data.prompt_template", "toggle_action_dimensions": "data.toggle_action_dimensions",
    "normalization_mapping": "data.normalization_mode", "model_id": "model.video_pretrained_path",
    "tokenizer_model_id": "embodied data precompute-text --text-encoder-path",
    "text_encoder_model_id": "embodied data precompute-text --text-encoder-path",
    "load_text_encoder": "prompts are always encoded ahead (data.text_cache_dir)",
    "base_model_id": "--pretrained-checkpoint",
    "mot_checkpoint_mixed_attn": "recompute only (--activation-checkpoint-*)",
    "torch_dtype": "--dtype", "text_cfg_scale": "unused by infer_action", "negative_prompt": "unused by infer_action",
    "freeze_video_expert": "--freeze-modules mot.mixtures.video,mot.layers.*.blocks.video",
    "optimizer_lr": "--lr-base", "optimizer_weight_decay": "--weight-decay", "n_obs_steps": "not read by FastWAM",
    "input_features": "data.camera_keys, data.state_dim", "output_features": "data.action_dim",
    "device": "the trainer's device", "use_amp": "--dtype", "use_peft": "--use-lora",
    "pretrained_path": "--pretrained-checkpoint", "pretrained_revision": "hub revision (local paths only)",
    "push_to_hub": "hub upload (not done by embodied)", "repo_id": "hub upload", "private": "hub upload",
    "tags": "hub upload", "license": "hub upload",
}
"""``FastWAMConfig`` keys that configure the run or the data section rather than the network."""

NOT_COMPARED: dict[str, str] = {
    "num_inference_steps": "a sampling setting", "inference_seed": "a sampling setting",
    "rand_device": "a sampling setting", "action_infer_shift": "a sampling setting",
    "video_infer_shift": "a sampling setting", "fp32_attention": "the attention precision of the run",
    "gradient_checkpointing": "memory only", "video_train_shift": "a training choice",
    "action_train_shift": "a training choice", "lambda_video": "a training choice",
    "lambda_action": "a training choice",
}
"""``model.*`` fields a checkpoint's config.json states that the model config may set differently."""


def _dict(doc: Mapping[str, Any], key: str, problems: list[str]) -> Mapping[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{key} = {value!r} must be a mapping")
        return {}
    return value


def _merge(fields: dict[str, Any], name: str, value: Any, key: str, problems: list[str]) -> None:
    """One model field fed by several reference keys: they must agree."""
    if name in fields and not same(fields[name], value):
        problems.append(f"{key} = {value!r} differs from the {fields[name]!r} another key sets for model.{name}; this "
                        f"port has one model.{name}")
    else:
        fields[name] = value


def reference_model_fields(doc: Mapping[str, Any], *, source: str = "config.json") -> dict[str, Any]:
    """The ``model.*`` fields a lerobot ``FastWAMConfig`` document sets, absent keys at lerobot's defaults.

    Raises:
        ConfigError: naming ``source`` and every key whose value this port does not implement.
    """
    problems = fixed_problems(doc, FIXED)
    known = set(TOP_FIELDS) | set(FIXED) | set(RUN_KEYS) | set(SCHEDULER_FIELDS) | {
        "loss", "video_dit_config", "action_dit_config", "proprio_dim", "sigma_shift"}
    warn_unknown(doc, known, where="", source=source, port="FastWAM", log=logger)
    fields = {field: doc.get(key, default) for key, (field, default) in TOP_FIELDS.items()}
    for key, table, fixed, run in (("video_dit_config", VIDEO_FIELDS, VIDEO_FIXED, VIDEO_RUN_KEYS),
                                   ("action_dit_config", ACTION_FIELDS, {}, ACTION_RUN_KEYS)):
        section = _dict(doc, key, problems)
        problems += fixed_problems(section, fixed, where=key)
        warn_unknown(section, set(table) | set(fixed) | set(run), where=key, source=source, port="FastWAM", log=logger)
        for theirs, (ours, default) in table.items():
            _merge(fields, ours, section.get(theirs, default), f"{key}.{theirs}", problems)
    for key, table in (*SCHEDULER_FIELDS.items(), ("loss", LOSS_FIELDS)):
        section = _dict(doc, key, problems)
        warn_unknown(section, set(table), where=key, source=source, port="FastWAM", log=logger)
        for theirs, (ours, default) in table.items():
            _merge(fields, ours, section.get(theirs, default), f"{key}.{theirs}", problems)
    if doc.get("sigma_shift") is not None:  # lerobot's override of the action sampling shift
        fields["action_infer_shift"] = doc["sigma_shift"]
    fields["use_proprio"] = doc.get("proprio_dim", 8) is not None
    if isinstance(fields.get("patch_size"), list | tuple):
        fields["patch_size"] = list(fields["patch_size"])
    raise_problems(problems, source)
    return fields


checkpoint_config_problems, check_checkpoint_config = checkpoint_config_checks(
    "FastWAM", policy_type="fastwam", model_fields=reference_model_fields, not_compared=NOT_COMPARED)
