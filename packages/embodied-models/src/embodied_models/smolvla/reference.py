"""The fields of lerobot 0.6.1's ``SmolVLAConfig`` and of the SmolVLM config it builds on that this port fixes to
one value, and where the run-level ones live here (the README's "Reference fields" table lists every field).

:func:`policy_problems` and :func:`vlm_problems` name each key whose value this port does not implement;
``lerobot_import.lerobot_configs`` (``embodied checkpoint import-lerobot-smolvla``) raises them as one UsageError
before anything is built. A lerobot ``config.json`` beside ``--pretrained-checkpoint`` is checked the same way and
must agree with the model config on the network fields it states (:data:`POLICY_MODEL_FIELDS`; the VLM's own
sizes are not beside a checkpoint, the strict load checks their shapes). No torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from embodied_models.vla.reference import (
    LEROBOT_OPTIMIZER_KEYS,
    LEROBOT_SCHEDULER_KEYS,
    checkpoint_config_checks,
    disagreements,
)

__all__ = ["POLICY_FIXED", "POLICY_MODEL_FIELDS", "RUN_KEYS", "TEXT_FIXED", "VISION_FIXED", "check_checkpoint_config",
           "checkpoint_config_problems", "policy_problems", "vlm_problems"]

POLICY_FIXED: dict[str, tuple[tuple[Any, ...], str]] = {
    "n_obs_steps": ((1,), "SmolVLA reads one observation step"),
    "adapt_to_pi_aloha": ((False,), "the Aloha joint conversion is not ported"),
    "use_delta_joint_actions_aloha": ((False,), "delta joint actions are not ported (lerobot raises too)"),
    "use_cache": ((True,), "sampling always reads the prefix KV cache (lerobot's use_cache=false runs the expert "
                  "without the prefix)"),
    "pad_language_to": (("longest", "max_length"), "both give the same values: the padding is masked; the language "
                        "is always padded to tokenizer_max_length here (static shapes)"),
}
"""``SmolVLAConfig`` key -> (the values this port implements, why)."""

TEXT_FIXED: dict[str, tuple[tuple[Any, ...], str]] = {
    "hidden_act": (("silu",), "SwiGLU with SiLU (SmolLM2)"),
    "attention_bias": ((False,), "no bias in q/k/v/o (SmolLM2)"),
    "mlp_bias": ((False,), "no bias in the MLP (SmolLM2)"),
}
"""VLM ``text_config`` key -> (the values this port implements, why); the action expert copies them."""

VISION_FIXED: dict[str, tuple[tuple[Any, ...], str]] = {
    "hidden_act": (("gelu_pytorch_tanh",), "tanh-GELU (SigLIP)"),
    "num_channels": ((3,), "RGB frames"),
    "attention_dropout": ((0.0,), "the vision encoder runs without dropout"),
}
"""VLM ``vision_config`` key -> (the values this port implements, why)."""

RUN_KEYS: dict[str, str] = {
    "chunk_size": "data.action_horizon",
    "n_action_steps": "embodied eval --replan-steps",
    "normalization_mapping": "data.normalization (one mode for state and action; VISUAL must be IDENTITY)",
    "resize_imgs_with_padding": "data.image_size (square)",
    "empty_cameras": "data.empty_cameras",
    "input_features": "data.camera_keys, data.state_key / data.state_dim",
    "output_features": "data.action_key / data.action_dim",
    "vlm_model_name": "--vlm-folder of the import (config and tokenizer); --tokenizer-path when training",
    "load_vlm_weights": "the weights come from --pretrained-checkpoint",
    "compile_model": "--compile",
    "compile_mode": "--compile-mode",
    **LEROBOT_OPTIMIZER_KEYS,
    **LEROBOT_SCHEDULER_KEYS,
    "device": "the trainer's device",
    "use_amp": "--dtype",
    "use_peft": "--use-lora / --lora-*",
}
"""``SmolVLAConfig`` keys that configure the run rather than the network: where our run config sets the same."""


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b or (type(a) is type(b) and a == b)
    return a == b


def _check(section: Mapping[str, Any], fixed: Mapping[str, tuple[tuple[Any, ...], str]], where: str) -> list[str]:
    problems = []
    for key, (supported, why) in fixed.items():
        if key in section and not any(_same(section[key], value) for value in supported):
            choices = " or ".join(json.dumps(v) for v in supported)
            problems.append(f"{where}{key}={json.dumps(section[key])} is not ported (supported: {choices}; {why})")
    return problems


def policy_problems(policy_cfg: Mapping[str, Any]) -> list[str]:
    """Messages for the ``SmolVLAConfig`` keys whose values this port does not implement (empty when none)."""
    problems = _check(policy_cfg, POLICY_FIXED, "")
    rtc = policy_cfg.get("rtc_config")
    if rtc is not None and (not isinstance(rtc, Mapping) or rtc.get("enabled", True)):
        problems.append(f"rtc_config={json.dumps(rtc)} is not ported (supported: null or enabled: false; real-time "
                        "chunking guidance)")
    return problems


def vlm_problems(vlm_cfg: Mapping[str, Any], *, image_size: int | None = None) -> list[str]:
    """Messages for the SmolVLM config keys whose values this port does not implement; ``image_size`` is the model
    resolution (the vision encoder's position table is built for it, as lerobot builds it for the config's)."""
    vision, text = vlm_cfg.get("vision_config") or {}, vlm_cfg.get("text_config") or {}
    problems = _check(text, TEXT_FIXED, "text_config.") + _check(vision, VISION_FIXED, "vision_config.")
    if image_size is not None and "image_size" in vision and int(vision["image_size"]) != image_size:
        problems.append(f"vision_config.image_size {vision['image_size']} differs from resize_imgs_with_padding "
                        f"{image_size}: the vision position table here is built for the model resolution")
    return problems


POLICY_MODEL_FIELDS: dict[str, tuple[str, Any]] = {
    "max_state_dim": ("max_state_dim", 32),
    "max_action_dim": ("max_action_dim", 32),
    "num_vlm_layers": ("num_vlm_layers", 16),
    "num_expert_layers": ("num_expert_layers", -1),
    "attention_mode": ("attention_mode", "cross_attn"),
    "self_attn_every_n_layers": ("self_attn_every_n_layers", 2),
    "expert_width_multiplier": ("expert_width_multiplier", 0.75),
    "add_image_special_tokens": ("add_image_special_tokens", False),
    "prefix_length": ("prefix_length", -1),
    "min_period": ("min_period", 4e-3),
    "max_period": ("max_period", 4.0),
}
"""``SmolVLAConfig`` keys that fix the network -> (``model.*`` field, lerobot's default), compared with the model
config when a checkpoint's config.json states them (the inference and fine-tuning settings are not)."""


def _normalized(fields: dict[str, Any]) -> dict[str, Any]:
    """Equivalent spellings made equal: lerobot's num_expert_layers -1 is our 0 (one expert layer per VLM layer),
    and every prefix_length <= 0 pads nothing."""
    return {**fields, "num_expert_layers": max(0, int(fields["num_expert_layers"])),
            "prefix_length": max(-1, int(fields["prefix_length"]))}


def _network_fields(doc: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """The network fields (:data:`POLICY_MODEL_FIELDS`) a lerobot ``SmolVLAConfig`` document sets, absent keys at
    lerobot's defaults, equivalent spellings made equal (``source`` is not read: :func:`policy_problems` names what
    this port does not implement before the fields are read)."""
    return _normalized({field: doc.get(key, default) for key, (field, default) in POLICY_MODEL_FIELDS.items()})


def _model_disagreements(model_config: Any, theirs: dict[str, Any]) -> list[str]:
    ours = _normalized({field: getattr(model_config, field) for field in theirs})
    return disagreements(SimpleNamespace(**ours), theirs)


checkpoint_config_problems, check_checkpoint_config = checkpoint_config_checks(
    "SmolVLA", policy_type="smolvla", model_fields=_network_fields, refused=policy_problems,
    compare=_model_disagreements)
