"""GR00T N1.7's reference configs read field by field: the checkpoint's ``config.json`` in Isaac-GR00T's form
(``model_type: Gr00tN1d7``, what lerobot 0.6.1 reads as ``GR00TN17Config``; keys and defaults are lerobot's
``GR00T_N1_7_DEFAULTS``, with the ``diffusion_model_cfg`` / ``vl_self_attention_cfg`` dicts passed to its DiT and VL
self-attention) and lerobot's policy config (``type: groot``, ``GrootConfig``, what ``lerobot-train`` writes).

Every key is one of:

- mapped onto a ``model.*`` field (:data:`MODEL_FIELDS`, :data:`DIT_FIELDS`, :data:`VL_FIELDS`,
  :data:`POLICY_FIELDS`): a config.json beside ``--pretrained-checkpoint`` must agree with the model config on
  those it states (:data:`NOT_COMPARED` lists the ones a fine-tune may choose);
- fixed to the values this port implements (:data:`FIXED`, :data:`DIT_FIXED`, :data:`VL_FIXED`,
  :data:`POLICY_FIXED`): any other value is a ConfigError naming the key;
- a setting of the run or of the processor sidecar, or unused by the network (:data:`RUN_KEYS`,
  :data:`POLICY_RUN_KEYS`, each with where our run config sets the same or why it does not matter);
- anything else is named in a warning (other releases write bookkeeping keys of their own).

Keys a document leaves out are not compared (the official checkpoint writes all of them). The README's "Reference
fields" table is the same content. No torch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from embodied_models.vla.reference import checkpoint_config_checks, fixed_problems, raise_problems, warn_unknown

__all__ = ["DIT_FIELDS", "DIT_FIXED", "FIXED", "MODEL_FIELDS", "NOT_COMPARED", "OFFICIAL_MODEL_TYPE", "POLICY_FIELDS",
           "POLICY_FIXED", "POLICY_RUN_KEYS", "RUN_KEYS", "VL_FIELDS", "VL_FIXED", "check_checkpoint_config",
           "checkpoint_config_problems", "reference_model_fields"]

logger = logging.getLogger("embodied.models.groot_n1_7")

OFFICIAL_MODEL_TYPE = "Gr00tN1d7"
POLICY_TYPE = "groot"

MODEL_FIELDS: dict[str, str] = {
    "select_layer": "select_layer", "backbone_embedding_dim": "llm_width", "hidden_size": "hidden_size",
    "input_embedding_dim": "input_embedding_dim", "max_state_dim": "max_state_dim",
    "max_action_dim": "max_action_dim", "action_horizon": "action_horizon",
    "max_num_embodiments": "max_num_embodiments", "max_seq_len": "max_seq_len",
    "attend_text_every_n_blocks": "attend_text_every_n_blocks", "num_inference_timesteps": "num_inference_steps",
    "noise_beta_alpha": "noise_beta_alpha", "noise_beta_beta": "noise_beta_beta", "noise_s": "noise_s",
    "num_timestep_buckets": "num_timestep_buckets", "state_dropout_prob": "state_dropout_prob",
    "tune_llm": "tune_llm", "tune_visual": "tune_visual",
}
"""``GR00TN17Config`` key -> ``model.*`` field."""

DIT_FIELDS: dict[str, str] = {"num_layers": "dit_num_layers", "num_attention_heads": "dit_num_heads",
                              "attention_head_dim": "dit_head_dim", "output_dim": "hidden_size", "dropout": "dropout"}
"""``diffusion_model_cfg`` key -> ``model.*`` field."""

VL_FIELDS: dict[str, str] = {"num_layers": "vl_num_layers", "num_attention_heads": "vl_num_heads",
                             "attention_head_dim": "vl_head_dim", "dropout": "dropout"}
"""``vl_self_attention_cfg`` key -> ``model.*`` field (one dropout field for both transformers)."""

FIXED: dict[str, tuple[Any, ...]] = {
    "backbone_model_type": ("qwen",),
    "reproject_vision": (False,),
    "use_alternate_vl_dit": (True,),
    "use_vlln": (True,),
    "add_pos_embed": (True,),
    "state_history_length": (1,),
    "use_relative_action": (False,),
    "apply_sincos_state_encoding": (False,),
    "use_mean_std": (False,),
    "exclude_state": (False,),
}
"""``GR00TN17Config`` keys with the values this port implements: the Qwen3-VL backbone without re-projection, the
AlternateVL DiT with vlln and learned action positions, one state step, absolute actions, per-dimension min-max /
percentile normalization of the raw state (a checkpoint trained otherwise needs what is not ported)."""

_BLOCK_FIXED: dict[str, tuple[Any, ...]] = {
    "positional_embeddings": (None,),
    "final_dropout": (True,),
    "attention_bias": (True,),
    "activation_fn": ("gelu-approximate",),
    "upcast_attention": (False,),
    "compute_dtype": ("float32", "torch.float32"),
}
DIT_FIXED: dict[str, tuple[Any, ...]] = {**_BLOCK_FIXED, "norm_type": ("ada_norm",),
                                         "interleave_self_attention": (True,), "norm_elementwise_affine": (False,),
                                         "norm_eps": (1e-5,)}
"""``diffusion_model_cfg`` keys (lerobot's ``DiT`` kwargs) with the values this port implements."""
VL_FIXED: dict[str, tuple[Any, ...]] = dict(_BLOCK_FIXED)
"""``vl_self_attention_cfg`` keys (``SelfAttentionTransformer`` kwargs) with the values this port implements."""
_BLOCK_UNUSED = ("num_embeds_ada_norm", "max_num_positional_embeddings")  # read only with positional embeddings

RUN_KEYS: dict[str, str] = {
    "model_dtype": "--dtype", "dtype": "--dtype", "load_bf16": "--dtype (parameters stay float32)",
    "backbone_trainable_params_fp32": "trainable parameters are always float32",
    "model_name": "the backbone sizes are model.llm_* / vision_* (Cosmos-Reason2-2B's by default), its weights "
                  "come with --pretrained-checkpoint and its processor from --tokenizer-path",
    "model_revision": "hub revision (local folders only)",
    "use_flash_attention": "the attention kernel (the same attention)",
    "tune_top_llm_layers": "model.tune_llm=true with --freeze-modules on the lower backbone layers",
    "tune_projector": "--freeze-modules action_head.state_encoder,action_head.action_encoder,"
                      "action_head.action_decoder,action_head.position_embedding",
    "tune_diffusion_model": "--freeze-modules action_head.model",
    "tune_vlln": "--freeze-modules action_head.vlln,action_head.vl_self_attention",
    "image_token_id": "the processor folder's image token",
    "image_target_size": "data.image_size", "image_crop_size": "data.crop_fraction of data.shortest_image_edge",
    "shortest_image_edge": "data.shortest_image_edge", "crop_fraction": "data.crop_fraction",
    "formalize_language": "data.formalize_language", "use_percentiles": "data.normalization (percentile / min_max)",
    "random_rotation_angle": "training-time image augmentation (data.image_augmentation)",
    "color_jitter_params": "training-time image augmentation (data.image_augmentation)",
    "use_albumentations_transforms": "training-time image augmentation (data.image_augmentation)",
    "extra_augmentation_config": "training-time image augmentation (data.image_augmentation)",
    "attn_dropout": "unused by the N1.7 network (the blocks take diffusion_model_cfg.dropout)",
    "rtc_ramp_rate": "real-time chunking blend, used only with an RTC prefix (not ported)",
    "model_type": "the document kind (Gr00tN1d7)", "architectures": "transformers bookkeeping",
    "transformers_version": "transformers bookkeeping", "torch_dtype": "--dtype",
}
"""``GR00TN17Config`` keys that configure the run, the processor sidecar or nothing in the network."""

POLICY_FIELDS: dict[str, str] = {"max_state_dim": "max_state_dim", "max_action_dim": "max_action_dim",
                                 "num_inference_timesteps": "num_inference_steps", "tune_llm": "tune_llm",
                                 "tune_visual": "tune_visual"}
"""lerobot ``GrootConfig`` key -> ``model.*`` field (``num_inference_timesteps`` null keeps the checkpoint's)."""

POLICY_FIXED: dict[str, tuple[Any, ...]] = {
    "n_obs_steps": (1,),
    "use_relative_actions": (False,),
    "action_decode_transform": (None, "none"),
    "tokenizer_assets_repo": (None,),
}
"""lerobot ``GrootConfig`` keys with the values this port implements (``action_decode_transform: libero`` is
lerobot's LIBERO gripper sign conversion at evaluation, left to the env; ``tokenizer_assets_repo`` marks an N1.5
config, which lerobot refuses too)."""

POLICY_RUN_KEYS: dict[str, str] = {
    "type": "the policy type ('groot')", "chunk_size": "data.action_horizon",
    "n_action_steps": "embodied eval --replan-steps", "embodiment_tag": "data.embodiment_tag",
    "base_model_path": "--pretrained-checkpoint", "normalization_mapping": "data.normalization (IDENTITY in lerobot: "
    "GR00T normalizes in its processor)", "input_features": "data.camera_keys, data.state_dim",
    "output_features": "data.action_dim", "relative_exclude_joints": "read only with use_relative_actions (refused)",
    "rtc_ramp_rate": "real-time chunking (not ported)", "use_flash_attention": "the attention kernel",
    "tune_top_llm_layers": RUN_KEYS["tune_top_llm_layers"], "tune_projector": RUN_KEYS["tune_projector"],
    "tune_diffusion_model": RUN_KEYS["tune_diffusion_model"], "tune_vlln": RUN_KEYS["tune_vlln"],
    "optimizer_lr": "--lr-base", "optimizer_betas": "--adam-beta1 / --adam-beta2", "optimizer_eps": "--adam-eps",
    "optimizer_weight_decay": "--weight-decay", "warmup_ratio": "--lr-warmup-iters (a count here)",
    "use_bf16": "--dtype", "model_params_fp32": "parameters are always float32", "device": "the trainer's device",
    "use_amp": "--dtype", "use_peft": "--use-lora", "pretrained_path": "--pretrained-checkpoint",
    "pretrained_revision": "hub revision (local folders only)", "push_to_hub": "hub upload (not done by embodied)",
    "repo_id": "hub upload", "private": "hub upload", "tags": "hub upload", "license": "hub upload",
    **{key: "deprecated in lerobot 0.6.1 (kept only to parse old configs), unused" for key in (
        "image_size", "lora_rank", "lora_alpha", "lora_dropout", "lora_full_model", "video_backend",
        "balance_dataset_weights", "balance_trajectory_weights", "dataset_paths", "output_dir", "save_steps",
        "max_steps", "batch_size", "dataloader_num_workers", "report_to", "resume")},
}
"""lerobot ``GrootConfig`` keys that configure the run rather than the network."""

NOT_COMPARED: dict[str, str] = {
    "tune_llm": "a training choice (which parts train)",
    "tune_visual": "a training choice (which parts train)",
    "dropout": "a training choice (inactive at inference)",
}
"""``model.*`` fields a checkpoint's config.json states that the model config may set differently."""


def _section(doc: Mapping[str, Any], key: str, problems: list[str]) -> Mapping[str, Any]:
    value = doc.get(key) or {}
    if not isinstance(value, Mapping):
        problems.append(f"{key} = {value!r} must be a mapping")
        return {}
    return value


def _official_fields(doc: Mapping[str, Any], source: str, problems: list[str]) -> dict[str, Any]:
    problems += fixed_problems(doc, FIXED)
    warn_unknown(doc, set(MODEL_FIELDS) | set(FIXED) | set(RUN_KEYS) | {"diffusion_model_cfg", "vl_self_attention_cfg"},
                 where="", source=source, port="GR00T N1.7", log=logger)
    fields = {ours: doc[theirs] for theirs, ours in MODEL_FIELDS.items() if theirs in doc}
    dropouts = {}
    for key, table, fixed in (("diffusion_model_cfg", DIT_FIELDS, DIT_FIXED), ("vl_self_attention_cfg", VL_FIELDS,
                                                                              VL_FIXED)):
        section = _section(doc, key, problems)
        problems += fixed_problems(section, fixed, where=key)
        warn_unknown(section, set(table) | set(fixed) | set(_BLOCK_UNUSED), where=key, source=source,
                     port="GR00T N1.7", log=logger)
        for theirs, ours in table.items():
            if theirs not in section:
                continue
            if ours == "dropout":
                dropouts[key] = section[theirs]
            elif ours in fields and fields[ours] != section[theirs]:
                problems.append(f"{key}.{theirs} = {section[theirs]!r} differs from {ours} = {fields[ours]!r}; this "
                                f"port has one model.{ours} for both")
            else:
                fields[ours] = section[theirs]
    if len(set(dropouts.values())) > 1:
        problems.append(f"diffusion_model_cfg.dropout and vl_self_attention_cfg.dropout differ ({dropouts}); this "
                        "port has one model.dropout for both")
    if dropouts:
        fields["dropout"] = next(iter(dropouts.values()))
    return fields


def _policy_fields(doc: Mapping[str, Any], source: str, problems: list[str]) -> dict[str, Any]:
    problems += fixed_problems(doc, POLICY_FIXED)
    warn_unknown(doc, set(POLICY_FIELDS) | set(POLICY_FIXED) | set(POLICY_RUN_KEYS), where="", source=source,
                 port="GR00T N1.7", log=logger)
    return {ours: doc[theirs] for theirs, ours in POLICY_FIELDS.items()
            if theirs in doc and not (theirs == "num_inference_timesteps" and doc[theirs] is None)}


def reference_model_fields(doc: Mapping[str, Any], *, source: str = "config.json") -> dict[str, Any]:
    """The ``model.*`` fields a reference document states: an official ``Gr00tN1d7`` config or a lerobot ``groot``
    policy config (keys it leaves out are not returned).

    Raises:
        ConfigError: naming ``source`` and every key whose value this port does not implement.
    """
    problems: list[str] = []
    if doc.get("type") == POLICY_TYPE:
        fields = _policy_fields(doc, source, problems)
    else:
        fields = _official_fields(doc, source, problems)
    raise_problems(problems, source)
    return fields


def _describes_groot_n1_7(doc: Mapping[str, Any]) -> bool:
    """An official ``Gr00tN1d7`` config or a lerobot ``groot`` policy config (not, e.g., our own policy folder, which
    describes itself)."""
    return doc.get("model_type") == OFFICIAL_MODEL_TYPE or doc.get("type") == POLICY_TYPE


checkpoint_config_problems, check_checkpoint_config = checkpoint_config_checks(
    "GR00T N1.7", policy_type=_describes_groot_n1_7, model_fields=reference_model_fields, not_compared=NOT_COMPARED)
