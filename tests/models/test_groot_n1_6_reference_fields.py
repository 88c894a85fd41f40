"""GR00T N1.6 against LoongForge's config fields: every field of its model and data configs (and the Eagle3 backbone
config) is in the README's table, and every fixed one refuses any other value with a config error naming it.

Config construction only (the strict converter every YAML / dotlist / flag goes through); no model is built.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from embodied_core.config.converter import structure
from embodied_core.errors import ConfigError
from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig

README = Path(__file__).resolve().parents[2] / "packages/embodied-models/src/embodied_models/groot_n1_6/README.md"

# LoongForge c6275661: the field names of GrootN1d6ModelConfig, its diffusion_model_cfg keys, GrootN1d6DataConfig.
REFERENCE_MODEL_FIELDS = (
    "model_type", "base_model_path", "model_name", "vlm_tokenizer_path", "backbone_model_type", "action_dim",
    "state_dim", "action_horizon", "max_action_dim", "max_state_dim", "hidden_size", "input_embedding_dim",
    "backbone_embedding_dim", "select_layer", "reproject_vision", "use_flash_attention", "load_bf16",
    "backbone_trainable_params_fp32", "tune_top_llm_layers", "tune_llm", "tune_visual", "use_alternate_vl_dit",
    "attend_text_every_n_blocks", "diffusion_model_cfg", "add_pos_embed", "use_vlln", "max_seq_len",
    "max_num_embodiments", "num_inference_timesteps", "noise_beta_alpha", "noise_beta_beta", "noise_s",
    "num_timestep_buckets", "state_dropout_prob", "state_additive_noise_scale", "tune_projector",
    "tune_diffusion_model", "tune_vlln", "use_bf16",
)
REFERENCE_DIT_KEYS = ("positional_embeddings", "num_layers", "num_attention_heads", "attention_head_dim", "norm_type",
                      "dropout", "final_dropout", "output_dim", "interleave_self_attention")
REFERENCE_DATA_FIELDS = (
    "embodiment_tag", "groot_preprocess_mode", "max_token_len", "backbone_model_type", "preprocess_action_horizon",
    "preprocess_max_action_dim", "preprocess_max_state_dim", "image_crop_size", "image_target_size",
    "shortest_image_edge", "crop_fraction", "random_rotation_angle", "color_jitter_params",
    "use_albumentations_transforms", "formalize_language", "apply_sincos_state_encoding", "use_relative_action",
    "use_processor_image_size", "observation_delta_indices",
)
EAGLE_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "patch_size",
                "num_patches", "layer_norm_eps", "window_size", "full_attention_indexes", "use_windows_attn",
                "use_rope", "select_layer", "downsample_ratio", "image_token_index", "vocab_size",
                "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "tie_word_embeddings")

# (section class, path, field, a value LoongForge accepts and ours does not implement)
REFUSED: list[tuple[type, str, str, Any]] = [
    (GrootN16ModelConfig, "model", "use_alternate_vl_dit", False),
    (GrootN16ModelConfig, "model", "use_vlln", False),
    (GrootN16ModelConfig, "model", "add_pos_embed", False),
    (GrootN16ModelConfig, "model", "state_dropout_prob", 0.2),
    (GrootN16ModelConfig, "model", "state_additive_noise_scale", 0.05),
    (GrootN16ModelConfig, "model", "vision_select_layer", -4),
    (GrootN16ModelConfig, "model", "downsample_ratio", 0.25),
    (GrootN16DataConfig, "data", "random_rotation_angle", 10),
    (GrootN16DataConfig, "data", "color_jitter_params", {"brightness": 0.3, "contrast": 0.4}),
    (GrootN16DataConfig, "data", "use_albumentations_transforms", False),
    (GrootN16DataConfig, "data", "apply_sincos_state_encoding", True),
    (GrootN16DataConfig, "data", "use_relative_action", True),
    (GrootN16DataConfig, "data", "use_processor_image_size", True),
]


def _section() -> str:
    text = README.read_text()
    start = text.index("## Reference fields")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_every_reference_field_is_in_the_readme_table() -> None:
    table = _section()
    named = set(re.findall(r"`(?:[a-z_]+\.)?\.?([A-Za-z_0-9]+)", table)) | set(re.findall(r"\.([a-z_0-9]+)`", table))
    missing = [name for name in REFERENCE_MODEL_FIELDS + REFERENCE_DIT_KEYS + REFERENCE_DATA_FIELDS + EAGLE_FIELDS
               if name not in named]
    assert not missing, missing
    assert table.count("**refused** (only") == len(REFUSED)


@pytest.mark.parametrize(("cls", "path", "field", "value"), REFUSED, ids=[r[2] for r in REFUSED])
def test_a_fixed_field_refuses_any_other_value(cls: type, path: str, field: str, value: Any) -> None:
    default = structure({}, cls, path=path)
    assert getattr(structure({field: getattr(default, field)}, cls, path=path), field) == getattr(default, field)
    with pytest.raises(ConfigError) as info:
        structure({field: value}, cls, path=path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}.{field}: ") and "only" in problem, problem


def test_a_loongforge_diffusion_model_cfg_section_is_an_unknown_key() -> None:
    with pytest.raises(ConfigError, match=r"model\.diffusion_model_cfg"):
        structure({"diffusion_model_cfg": {"num_layers": 32}}, GrootN16ModelConfig, path="model")
