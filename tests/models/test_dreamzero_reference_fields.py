"""DreamZero against LoongForge's config fields (issue 26): every reference field is in the README's table, every
fixed one refuses any other value with a config error naming it, and the one made configurable works.

Config construction only (the strict converter every YAML / dotlist / flag goes through); no model is built.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

from embodied_core.config.converter import structure
from embodied_core.errors import ConfigError
from embodied_models.dreamzero.config import DreamZeroModelConfig
from embodied_models.dreamzero.data.config import DreamZeroDataConfig
from embodied_models.dreamzero.trainer import round_trainable_

README = Path(__file__).resolve().parents[2] / "packages/embodied-models/src/embodied_models/dreamzero/README.md"

# LoongForge c6275661: the field names of DreamZeroConfig and DreamZeroDataConfig (names only).
REFERENCE_MODEL_FIELDS = (
    "model_type", "backbone_variant", "model_dtype", "num_frames", "action_horizon", "n_action_steps",
    "state_horizon", "text_len", "max_state_dim", "max_action_dim", "add_pos_embed", "action_head_hidden_size",
    "dit_action_state_hidden_size", "attn_dropout", "input_embedding_dim", "num_frame_per_block",
    "num_action_per_block", "num_state_per_block", "max_chunk_size", "attention_backend", "num_inference_timesteps",
    "num_dit_steps", "disable_reduced_precision_reduction", "disable_train_autocast", "skip_init_weights",
    "fsdp_initial_param_rounding_dtype", "compile_causal_attention", "compile_causal_attention_parts",
    "compile_causal_attention_warmup_frames", "compile_causal_attention_warmup_blocks",
    "compile_causal_attention_warmup_batch", "compile_causal_attention_warmup_backward",
    "compile_causal_cross_attention", "compile_cross_attention_emulate_precision_casts",
    "compile_block_norm_modulate", "block_norm_modulate_impl", "block_norm_modulate_triton_warps",
    "qk_rmsnorm_impl", "skip_single_state_attention", "manual_self_attn_linear_backward", "flash_attention_dense",
    "flash_attention_dense_min_q", "flash_attention_dense_policy", "cache_fa_lens", "cache_fa_lens_clone",
    "avoid_rope_reconcat", "fused_rope", "fused_rope_fp64", "batch_vae_encode", "prompt_emb_cache",
    "prompt_emb_cache_max_entries", "precomputed_cache", "noise_beta_alpha", "noise_beta_beta", "noise_s",
    "num_timestep_buckets", "decouple_video_action_noise", "video_noise_beta_alpha", "video_noise_beta_beta",
    "text_encoder_pretrained_path", "image_encoder_pretrained_path", "vae_pretrained_path", "dit_pretrained_path",
    "dit_init_checkpoint_path", "action_state_init_checkpoint_path", "vae_tiled", "vae_tile_size_height",
    "vae_tile_size_width", "vae_tile_stride_height", "vae_tile_stride_width", "action_loss_embodiment_ids",
    "max_num_embodiments", "tune_projector", "tune_diffusion_model", "freeze_decode_layer",
    "train_rng_reset_after_first_batch", "train_rng_seed", "train_rng_cpu_burn", "num_layers", "hidden_size",
    "num_attention_heads", "ffn_hidden_size", "kv_channels", "seq_length", "max_position_embeddings",
    "attention_dropout", "hidden_dropout", "norm_epsilon", "add_bias_linear", "add_qkv_bias",
    "untie_embeddings_and_output_weights", "add_position_embedding", "qk_layernorm", "swiglu",
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "deallocate_pipeline_outputs", "random_fallback_cpu",
    "fp8", "fp4", "bf16", "fp16", "enable_autocast", "calculate_per_token_loss", "init_model_with_meta_device",
    "barrier_with_L1_time", "fine_grained_activation_offloading", "overlap_moe_expert_parallel_comm",
    "no_sync_func", "input_features", "output_features",
)
REFERENCE_DATA_FIELDS = (
    "embodiment_tag", "image_height", "image_width", "crop_scale", "enable_color_jitter",
    "use_sample_transform_seed", "sample_transform_seed", "max_text_length", "use_global_metadata",
    "metadata_version", "relative_action", "relative_action_keys", "relative_action_per_horizon",
    "language_chunk_sampling", "require_full_language_chunks", "use_mixture_dataset", "balance_dataset_weights",
    "balance_trajectory_weights", "sampler_type", "sampler_seed", "mixture_sampling_seed",
    "sampler_worker_batching", "shard_sampling_rate", "num_steps_per_shard", "num_shards_to_sample",
    "allow_padding_at_end",
)

# (section class, path, field, a value LoongForge accepts and ours does not implement)
REFUSED: list[tuple[type, str, str, Any]] = [
    (DreamZeroModelConfig, "model", "num_dit_steps", 5),
    (DreamZeroModelConfig, "model", "vae_tiled", True),
    (DreamZeroModelConfig, "model", "precomputed_cache", {"cache_dir": "cache", "features": {"video_latents": {}}}),
    (DreamZeroDataConfig, "data", "use_global_metadata", True),
    (DreamZeroDataConfig, "data", "relative_action_per_horizon", True),
]


def _section(name: str) -> str:
    text = README.read_text()
    start = text.index("## Reference fields")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_every_reference_field_is_in_the_readme_table() -> None:
    table = _section("Reference fields")
    named = set(re.findall(r"`([A-Za-z_0-9]+)", table))
    missing = [name for name in REFERENCE_MODEL_FIELDS + REFERENCE_DATA_FIELDS if name not in named]
    assert not missing, missing
    assert table.count("| **refused**") == len(REFUSED)


@pytest.mark.parametrize(("cls", "path", "field", "value"), REFUSED, ids=[r[2] for r in REFUSED])
def test_a_fixed_field_refuses_any_other_value(cls: type, path: str, field: str, value: Any) -> None:
    default = structure({}, cls, path=path)
    assert getattr(structure({field: getattr(default, field)}, cls, path=path), field) == getattr(default, field)
    with pytest.raises(ConfigError) as info:
        structure({field: value}, cls, path=path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}.{field}: ")
    assert "only" in problem or "data.precomputed_cache_dir" in problem


def test_initial_param_rounding_is_configurable() -> None:
    assert structure({}, DreamZeroModelConfig, path="model").fsdp_initial_param_rounding_dtype is None
    for dtype in ("bf16", "fp16"):
        assert structure({"fsdp_initial_param_rounding_dtype": dtype}, DreamZeroModelConfig,
                         path="model").fsdp_initial_param_rounding_dtype == dtype
    with pytest.raises(ConfigError, match=r"model.fsdp_initial_param_rounding_dtype: 'fp8' .*valid: bf16, fp16"):
        structure({"fsdp_initial_param_rounding_dtype": "fp8"}, DreamZeroModelConfig, path="model")
    trained = torch.nn.Parameter(torch.tensor([1.0 + 2**-10, 3.0e-3, -7.123456]))
    frozen = torch.nn.Parameter(torch.tensor([1.0 + 2**-10]), requires_grad=False)
    optimizer = torch.optim.SGD([{"params": [trained]}, {"params": [frozen]}], lr=0.1)
    assert round_trainable_(optimizer, "bf16") == 3
    assert trained.dtype == torch.float32
    assert torch.equal(trained.data, torch.tensor([1.0 + 2**-10, 3.0e-3, -7.123456]).bfloat16().float())
    assert trained[0].item() == 1.0 and frozen.item() == 1.0 + 2**-10
