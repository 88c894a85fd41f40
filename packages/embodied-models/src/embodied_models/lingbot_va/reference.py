"""lerobot 0.6.1's ``LingBotVAConfig`` read field by field (what ``lerobot-train`` writes as ``pretrained_model/
config.json`` for a ``lingbot_va`` policy).

Every key is mapped onto a ``model.*`` field (:data:`MODEL_FIELDS`; ``attn_mode`` through :data:`ATTN_MODES`), fixed
to the values this port implements (:data:`FIXED`), or a setting of the data section or the run (:data:`RUN_KEYS`,
with where ours sets it); anything else is named in a warning. Absent keys take lerobot's defaults.

A ``config.json`` beside ``--pretrained-checkpoint`` or ``model.pretrained_path`` is read this way before anything
is built: the model config must agree with it on every field that defines the network and its flow schedules
(:data:`NOT_COMPARED` lists the sampling choices a run may make differently). The README's "Reference fields" table
is the same content. No torch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from embodied_models.vla.reference import checkpoint_config_checks, fixed_problems, raise_problems, warn_unknown

__all__ = ["ATTN_MODES", "FIXED", "MODEL_FIELDS", "NOT_COMPARED", "RUN_KEYS", "check_checkpoint_config",
           "checkpoint_config_problems", "reference_model_fields"]

logger = logging.getLogger("embodied.models.lingbot_va")

MODEL_FIELDS: dict[str, tuple[str, Any]] = {
    "patch_size": ("patch_size", [1, 2, 2]), "num_attention_heads": ("num_attention_heads", 24),
    "attention_head_dim": ("attention_head_dim", 128), "in_channels": ("in_channels", 48),
    "out_channels": ("out_channels", 48), "action_dim": ("action_dim", 30), "text_dim": ("text_dim", 4096),
    "freq_dim": ("freq_dim", 256), "ffn_dim": ("ffn_dim", 14336), "num_layers": ("num_layers", 30),
    "cross_attn_norm": ("cross_attn_norm", True), "eps": ("eps", 1e-6), "snr_shift": ("snr_shift", 5.0),
    "action_snr_shift": ("action_snr_shift", 0.05), "max_sequence_length": ("text_len", 512),
    "used_action_channel_ids": ("used_action_channel_ids", list(range(7))),
    "num_inference_steps": ("num_inference_steps", 20),
    "action_num_inference_steps": ("action_num_inference_steps", 50),
    "guidance_scale": ("guidance_scale", 5.0), "action_guidance_scale": ("action_guidance_scale", 1.0),
    "video_exec_step": ("video_exec_step", -1), "attn_window": ("attn_window", 30),
}
"""``LingBotVAConfig`` key -> (``model.*`` field, lerobot's default)."""

ATTN_MODES = {"torch": "sdpa", "flashattn": "sdpa", "flex": "flex"}
"""lerobot's ``attn_mode`` -> ``model.attention_backend`` (flash-attention computes SDPA's attention)."""

FIXED: dict[str, tuple[Any, ...]] = {"attn_mode": tuple(ATTN_MODES), "dtype": ("bfloat16", "float16", "float32"),
                                     "n_obs_steps": (1,)}
"""``LingBotVAConfig`` keys with the values this port (and lerobot) accept; ``dtype`` is the run's ``--dtype``."""

RUN_KEYS: dict[str, str] = {
    "type": "the policy type ('lingbot_va')", "rope_max_seq_len": "stored by lerobot, never read",
    "wan_pretrained_path": "embodied data precompute-latents --base-model-path, model.pretrained_path",
    "text_encoder_device": "prompts are encoded into the policy folder", "obs_cam_keys": "data.camera_keys",
    "image_hflip": "data.image_hflip", "camera_layout": "data.camera_layout", "height": "data.image_size",
    "width": "data.image_size", "action_per_frame": "data.action_per_frame",
    "frame_chunk_size": "data.num_latent_frames", "save_predicted_video": "a side output (decoding is not ported)",
    "normalization_mapping": "data.normalize_actions", "optimizer_lr": "--lr-base",
    "optimizer_betas": "--adam-beta1 / --adam-beta2", "optimizer_eps": "--adam-eps",
    "optimizer_weight_decay": "--weight-decay", "optimizer_grad_clip_norm": "--clip-grad",
    "scheduler_warmup_steps": "--lr-warmup-iters with --lr-decay-style constant_with_warmup",
    "input_features": "data.camera_keys", "output_features": "data.action_dim", "device": "the trainer's device",
    "use_amp": "--dtype", "use_peft": "--use-lora", "pretrained_path": "--pretrained-checkpoint",
    "pretrained_revision": "hub revision (local paths only)", "push_to_hub": "hub upload (not done by embodied)",
    "repo_id": "hub upload", "private": "hub upload", "tags": "hub upload", "license": "hub upload",
}
"""``LingBotVAConfig`` keys that configure the data section or the run rather than the network."""

NOT_COMPARED: dict[str, str] = {
    "num_inference_steps": "a sampling setting", "action_num_inference_steps": "a sampling setting",
    "guidance_scale": "a sampling setting", "action_guidance_scale": "a sampling setting",
    "video_exec_step": "a sampling setting", "attn_window": "the serving cache size",
    "attention_backend": "the attention kernel",
}
"""``model.*`` fields a checkpoint's config.json states that the model config may set differently."""


def reference_model_fields(doc: Mapping[str, Any], *, source: str = "config.json") -> dict[str, Any]:
    """The ``model.*`` fields a lerobot ``LingBotVAConfig`` document sets, absent keys at lerobot's defaults.

    Raises:
        ConfigError: naming ``source`` and every key whose value this port does not implement.
    """
    problems = fixed_problems(doc, FIXED)
    warn_unknown(doc, set(MODEL_FIELDS) | set(FIXED) | set(RUN_KEYS), where="", source=source, port="LingBot-VA",
                 log=logger)
    raise_problems(problems, source)
    fields = {field: doc.get(key, default) for key, (field, default) in MODEL_FIELDS.items()}
    fields["patch_size"] = list(fields["patch_size"])
    fields["attention_backend"] = ATTN_MODES[doc.get("attn_mode", "torch")]
    return fields


checkpoint_config_problems, check_checkpoint_config = checkpoint_config_checks(
    "LingBot-VA", policy_type="lingbot_va", model_fields=reference_model_fields, not_compared=NOT_COMPARED)
