"""lerobot 0.6.1's ``PI05Config`` read field by field (what ``lerobot-train`` writes as ``pretrained_model/
config.json``, e.g. ``lerobot/pi05_base``).

Every key is mapped onto a ``model.*`` field (:data:`MODEL_FIELDS`; the two Gemma variants through
:data:`VARIANTS`), fixed to the values this port implements (:data:`FIXED`: another value is a ConfigError naming
the key), or a setting of the run (:data:`RUN_KEYS`, with where our run config sets it); a key in none of them is
named in a warning. lerobot hard-codes the rest of the network (PaliGemma's SigLIP So400m/14 vision tower and
vocabulary, Gemma's RMSNorm epsilon and RoPE base); the README's "Reference fields" table lists those too.

A ``config.json`` beside ``--pretrained-checkpoint`` is read this way before anything is built (and again by the
loader): the model config must agree with it on every field that changes the computation (:data:`NOT_COMPARED`
lists the ones a fine-tune may choose). No torch.
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
    fixed_problems,
    raise_problems,
    warn_unknown,
)

__all__ = ["FIXED", "MODEL_FIELDS", "NOT_COMPARED", "RUN_KEYS", "VARIANTS", "check_checkpoint_config",
           "checkpoint_config_problems", "reference_model_fields"]

logger = logging.getLogger("embodied.models.pi05")

VARIANTS: dict[str, dict[str, int]] = {
    "gemma_2b": {"width": 2048, "depth": 18, "mlp_dim": 16384, "num_heads": 8, "num_kv_heads": 1, "head_dim": 256},
    "gemma_300m": {"width": 1024, "depth": 18, "mlp_dim": 4096, "num_heads": 8, "num_kv_heads": 1, "head_dim": 256},
}
"""lerobot's ``get_gemma_config`` (openpi's ``gemma.get_config``): the sizes each variant name stands for."""

MODEL_FIELDS: dict[str, tuple[str, Any]] = {
    "max_state_dim": ("max_state_dim", 32),
    "max_action_dim": ("max_action_dim", 32),
    "num_inference_steps": ("num_inference_steps", 10),
    "time_sampling_beta_alpha": ("time_beta_alpha", 1.5),
    "time_sampling_beta_beta": ("time_beta_beta", 1.0),
    "time_sampling_scale": ("time_scale", 0.999),
    "time_sampling_offset": ("time_offset", 0.001),
    "min_period": ("min_period", 4e-3),
    "max_period": ("max_period", 4.0),
    "tokenizer_max_length": ("max_token_len", 200),
    "gradient_checkpointing": ("gradient_checkpointing", False),
}
"""``PI05Config`` key -> (``model.*`` field, lerobot's default); the variants are read separately."""

FIXED: dict[str, tuple[Any, ...]] = {
    "n_obs_steps": (1,),
    "use_relative_actions": (False,),
    "dtype": ("float32", "bfloat16"),
}
"""``PI05Config`` keys with the values this port implements (one observation step; absolute actions); ``dtype``
is the run's ``--dtype``, checked here only for a value lerobot itself would refuse."""

RUN_KEYS: dict[str, str] = {
    "type": "the policy type ('pi05')",
    "chunk_size": "data.action_horizon",
    "n_action_steps": "embodied eval --replan-steps",
    "image_resolution": "data.image_size (square)",
    "empty_cameras": "data.num_image_slots beyond the cameras",
    "normalization_mapping": "data.normalization (one mode for state and action)",
    "relative_exclude_joints": "read only with use_relative_actions (refused)",
    "action_feature_names": "data.action_names (from the dataset)",
    "input_features": "data.camera_keys, data.state_key / data.state_dim",
    "output_features": "data.action_key / data.action_dim",
    "rtc_config": "real-time chunking: null or enabled false (checked)",
    "compile_model": "--compile",
    "compile_mode": "--compile-mode",
    "device": "the trainer's device",
    "use_amp": "--dtype",
    "use_peft": "--use-lora / --lora-*",
    "freeze_vision_encoder": "--freeze-modules vision_tower",
    "train_expert_only": "--freeze-modules vision_tower,multi_modal_projector,embed_tokens,vlm_norm and "
                         "layers.<i>.vlm of every layer",
    **LEROBOT_OPTIMIZER_KEYS,
    **LEROBOT_SCHEDULER_KEYS,
    **LEROBOT_HUB_KEYS,
}
"""``PI05Config`` keys that configure the run rather than the network: where our run config sets the same."""

NOT_COMPARED: dict[str, str] = {
    "num_inference_steps": "an inference setting",
    "time_beta_alpha": "the training-time distribution (a fine-tune's choice)",
    "time_beta_beta": "the training-time distribution (a fine-tune's choice)",
    "time_scale": "the training-time distribution (a fine-tune's choice)",
    "time_offset": "the training-time distribution (a fine-tune's choice)",
    "max_token_len": "the prompt length of the run (padding is masked)",
    "gradient_checkpointing": "memory only",
}
"""``model.*`` fields a checkpoint's config.json states that the model config may set differently."""


def _variant(doc: Mapping[str, Any], key: str, default: str, problems: list[str]) -> dict[str, int]:
    name = doc.get(key, default)
    if name not in VARIANTS:
        problems.append(f"{key} = {name!r} is not a Gemma variant (lerobot accepts {' or '.join(map(repr, VARIANTS))})")
        return {}
    return VARIANTS[name]


def reference_model_fields(doc: Mapping[str, Any], *, source: str = "config.json") -> dict[str, Any]:
    """The ``model.*`` fields a lerobot ``PI05Config`` document sets, absent keys at lerobot's defaults.

    Raises:
        ConfigError: naming ``source`` and every key whose value this port does not implement (keys it does not
            know are named in a warning).
    """
    problems = fixed_problems(doc, FIXED)
    rtc = doc.get("rtc_config")
    if rtc is not None and (not isinstance(rtc, Mapping) or rtc.get("enabled", True)):
        problems.append(f"rtc_config = {rtc!r} is not implemented by this port (supported: None or enabled false; "
                        "real-time chunking guidance)")
    resolution = doc.get("image_resolution", (224, 224))
    if not isinstance(resolution, list | tuple) or len(resolution) != 2 or resolution[0] != resolution[1]:
        problems.append(f"image_resolution = {resolution!r}: PaliGemma needs a square resolution")
    vlm = _variant(doc, "paligemma_variant", "gemma_2b", problems)
    expert = _variant(doc, "action_expert_variant", "gemma_300m", problems)
    known = set(MODEL_FIELDS) | set(FIXED) | set(RUN_KEYS) | {"paligemma_variant", "action_expert_variant"}
    warn_unknown(doc, known, where="", source=source, port="pi0.5", log=logger)
    raise_problems(problems, source)
    fields = {field: doc.get(key, default) for key, (field, default) in MODEL_FIELDS.items()}
    fields.update(vlm_width=vlm["width"], vlm_mlp_dim=vlm["mlp_dim"], expert_width=expert["width"],
                  expert_mlp_dim=expert["mlp_dim"], depth=vlm["depth"], num_heads=vlm["num_heads"],
                  num_kv_heads=vlm["num_kv_heads"], head_dim=vlm["head_dim"])
    return fields


checkpoint_config_problems, check_checkpoint_config = checkpoint_config_checks(
    "pi0.5", policy_type="pi05", model_fields=reference_model_fields, not_compared=NOT_COMPARED)
