"""The fields of lerobot 0.6.1's ``SmolVLAConfig`` and of the SmolVLM config it builds on that this port fixes to
one value, and where the run-level ones live here (the README's "Reference fields" table lists every field).

:func:`policy_problems` and :func:`vlm_problems` name each key whose value this port does not implement;
``lerobot_import.lerobot_configs`` (``embodied checkpoint import-lerobot-smolvla``) raises them as one UsageError
before anything is built. No torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["POLICY_FIXED", "RUN_KEYS", "TEXT_FIXED", "VISION_FIXED", "policy_problems", "vlm_problems"]

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
    "optimizer_lr": "--lr-base",
    "optimizer_betas": "--adam-beta1 / --adam-beta2",
    "optimizer_eps": "--adam-eps",
    "optimizer_weight_decay": "--weight-decay",
    "optimizer_grad_clip_norm": "--clip-grad",
    "scheduler_warmup_steps": "--lr-warmup-iters",
    "scheduler_decay_steps": "--lr-decay-iters",
    "scheduler_decay_lr": "--min-lr",
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
