"""Cosmos3 against LoongForge's config fields (issue 26): every reference field is in the README's table, every
fixed one refuses any other value with a config error naming it, and the derived one is checked.

Config construction only (the strict converter every YAML / dotlist / flag goes through); no model is built.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from embodied_core.config.converter import structure
from embodied_core.errors import ConfigError
from embodied_models.cosmos3.config import Cosmos3ModelConfig
from embodied_models.cosmos3.data.config import Cosmos3DataConfig

README = Path(__file__).resolve().parents[2] / "packages/embodied-models/src/embodied_models/cosmos3/README.md"
STATS = {"vae_latents_mean": [0.0] * 48, "vae_latents_std": [1.0] * 48}

# LoongForge c6275661: the field names of Cosmos3ModelConfig and Cosmos3DroidConfig (names only).
REFERENCE_MODEL_FIELDS = (
    "model_type", "qwen3_vl_path", "qk_norm_for_text", "qk_norm_for_diffusion", "vision_gen", "action_gen",
    "sound_gen", "latent_patch_size", "latent_channel_size", "latent_downsample_factor", "position_embedding_type",
    "enable_fps_modulation", "base_fps", "unified_3d_mrope_reset_spatial_ids",
    "unified_3d_mrope_temporal_modality_margin", "max_latent_h", "max_latent_w", "max_latent_t",
    "joint_attn_implementation", "train_time_distribution", "train_time_weight_method", "shift", "vae_path",
    "vae_temporal_compression", "vae_spatial_compression", "condition_frame_distribution", "max_action_dim",
    "num_embodiment_domains", "action_loss_weight", "loss_scale", "encode_exact_durations", "train_modules",
    "keys_to_skip_loading", "compile_model", "compile_dynamic", "disable_train_autocast",
)
REFERENCE_DATA_FIELDS = (
    "action_chunk_length", "max_text_tokens", "action_fps", "cfg_dropout_rate", "target_h", "target_w",
    "video_backend", "use_image_augmentation", "colorjitter_on_gpu",
)

# (section class, path, field, a value LoongForge accepts and ours does not implement)
REFUSED: list[tuple[type, str, str, Any]] = [
    (Cosmos3ModelConfig, "model", "qk_norm_for_diffusion", False),
    (Cosmos3ModelConfig, "model", "vision_gen", False),
    (Cosmos3ModelConfig, "model", "action_gen", False),
    (Cosmos3ModelConfig, "model", "sound_gen", True),
    (Cosmos3ModelConfig, "model", "position_embedding_type", "learned"),
    (Cosmos3ModelConfig, "model", "joint_attn_implementation", "three_way"),
    (Cosmos3ModelConfig, "model", "train_time_weight_method", "sigma"),
    (Cosmos3DataConfig, "data", "target_h", 480),
    (Cosmos3DataConfig, "data", "target_w", 480),
    (Cosmos3DataConfig, "data", "video_backend", "torchcodec"),
]


def _section() -> str:
    text = README.read_text()
    start = text.index("## Reference fields")
    return text[start:text.index("\n## ", start + 1)]


def test_every_reference_field_is_in_the_readme_table() -> None:
    table = _section()
    named = set(re.findall(r"`([A-Za-z_0-9]+)", table))
    missing = [name for name in REFERENCE_MODEL_FIELDS + REFERENCE_DATA_FIELDS if name not in named]
    assert not missing, missing
    refused_rows = [line for line in table.splitlines() if "| **refused**" in line]
    assert sorted(name for _, _, name, _ in REFUSED) == sorted(
        name for line in refused_rows for name in re.findall(r"`([A-Za-z_0-9]+)`", line.split("|")[1]))


@pytest.mark.parametrize(("cls", "path", "field", "value"), REFUSED, ids=[r[2] for r in REFUSED])
def test_a_fixed_field_refuses_any_other_value(cls: type, path: str, field: str, value: Any) -> None:
    base = STATS if cls is Cosmos3ModelConfig else {}
    default = getattr(structure(base, cls, path=path), field)
    assert getattr(structure({**base, field: default}, cls, path=path), field) == default
    with pytest.raises(ConfigError) as info:
        structure({**base, field: value}, cls, path=path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}.{field}: ")
    assert "only" in problem or "never reads it" in problem


def test_latent_downsample_factor_must_match_the_vae() -> None:
    assert structure(STATS, Cosmos3ModelConfig, path="model").validate() == []
    problems = structure({**STATS, "latent_downsample_factor": 8}, Cosmos3ModelConfig, path="model").validate()
    assert problems == ["model.latent_downsample_factor 8 is not the VAE's spatial compression 16 (model."
                        "vae_patch_size 2 * 2 ** (len(model.vae_dim_mult) - 1)); set it to 16"]
    three_stage = {**STATS, "vae_dim_mult": [1, 2, 4], "vae_temporal_downsample": [False, True],
                   "latent_downsample_factor": 8}
    assert structure(three_stage, Cosmos3ModelConfig, path="model").validate() == []
