"""What GR00T N1.6 and N1.7 share (``embodied_models.groot``) keeps each port's config as users see it: the shared
fields are placed where each section always listed them (``--help``, YAML and config.yaml order), every field keeps
its docstring where ``--help`` reads it, and ``embodied train --model-name groot_n1_7 --help`` lists the model and
data flags in that order with the shared fields' docstrings. Config construction only (no model is built)."""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import textwrap

import attrs
import pytest

from embodied_core.cli.train import parse_train_argv
from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_models.groot.config import SharedDataFields, SharedModelFields, place_groups
from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig
from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig

N17_MODEL = [
    "vocab_size", "llm_width", "llm_mlp_dim", "llm_num_heads", "llm_num_kv_heads", "llm_head_dim", "select_layer",
    "rms_norm_eps", "rope_theta", "mrope_section", "vision_depth", "vision_width", "vision_mlp_dim",
    "vision_num_heads", "vision_patch_size", "vision_temporal_patch_size", "vision_merge_size",
    "vision_num_position_embeddings", "deepstack_layers", "image_mean", "image_std", "tune_llm", "tune_visual",
    "hidden_size", "input_embedding_dim", "max_state_dim", "max_action_dim", "action_horizon", "max_num_embodiments",
    "max_seq_len", "dit_num_layers", "dit_num_heads", "dit_head_dim", "vl_num_layers", "vl_num_heads", "vl_head_dim",
    "attend_text_every_n_blocks", "dropout", "state_dropout_prob", "noise_beta_alpha", "noise_beta_beta", "noise_s",
    "num_timestep_buckets", "num_inference_steps", "gradient_checkpointing", "processor"]
N16_MODEL = [
    "vocab_size", "llm_width", "llm_mlp_dim", "llm_num_heads", "llm_num_kv_heads", "llm_head_dim", "select_layer",
    "rms_norm_eps", "rope_theta", "vision_depth", "vision_width", "vision_mlp_dim", "vision_num_heads",
    "vision_patch_size", "vision_num_patches", "vision_window_size", "vision_full_attention_layers",
    "vision_windowed_attention", "vision_rope", "vision_layer_norm_eps", "vision_pooling_head", "vision_select_layer",
    "downsample_ratio", "image_mean", "image_std", "tune_llm", "tune_visual", "tune_top_llm_layers", "hidden_size",
    "input_embedding_dim", "max_state_dim", "max_action_dim", "action_horizon", "max_num_embodiments", "max_seq_len",
    "dit_num_layers", "dit_num_heads", "dit_head_dim", "attend_text_every_n_blocks", "dropout", "tune_projector",
    "tune_diffusion_model", "tune_vlln", "noise_beta_alpha", "noise_beta_beta", "noise_s", "num_timestep_buckets",
    "num_inference_steps", "gradient_checkpointing", "processor", "use_alternate_vl_dit", "use_vlln", "add_pos_embed",
    "state_dropout_prob", "state_additive_noise_scale"]
DATA = ["camera_keys", "image_size", "shortest_image_edge", "crop_fraction", "action_horizon", "normalization",
        "clip_outliers", "embodiment_tag", "embodiment_id", "language_key", "formalize_language",
        "mask_padded_actions", "tokenizer_path"]
N16_DATA = [*DATA, "use_albumentations_transforms", "color_jitter_params", "random_rotation_angle",
            "apply_sincos_state_encoding", "use_relative_action", "use_processor_image_size"]


def _docs(cls: type) -> dict[str, str]:
    """Field docstrings as tyro reads them: the string under each field, the class's own first, then its bases'."""
    docs: dict[str, str] = {}
    for klass in cls.__mro__:
        if not attrs.has(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for node, following in itertools.pairwise(body):
            if isinstance(node, ast.AnnAssign) and isinstance(following, ast.Expr) and isinstance(
                    following.value, ast.Constant):
                docs.setdefault(node.target.id, " ".join(following.value.value.split()))
    return docs


@pytest.mark.parametrize(("cls", "own"), [(GrootModelConfig, N17_MODEL), (GrootN16ModelConfig, N16_MODEL),
                                          (GrootDataConfig, DATA), (GrootN16DataConfig, N16_DATA)],
                         ids=["n17_model", "n16_model", "n17_data", "n16_data"])
def test_the_shared_fields_keep_each_sections_order_and_docstrings(cls: type, own: list[str]) -> None:
    names = [field.name for field in attrs.fields(cls)]
    assert names[len(names) - len(own):] == own
    docs = _docs(cls)
    assert [name for name in names if not docs.get(name)] == []
    shared, base = ((SharedModelFields, BaseModelConfig) if "model" in cls.__name__.lower()
                    else (SharedDataFields, BaseDataConfig))
    assert {f.name for f in attrs.fields(shared)} - {f.name for f in attrs.fields(base)} <= set(own)


def test_place_groups_names_a_missing_anchor_or_field() -> None:
    with pytest.raises(TypeError, match="anchor 'nowhere'"):
        attrs.define(kw_only=True, field_transformer=place_groups(("nowhere", ("noise_s",))))(
            type("Bad", (SharedModelFields,), {"__annotations__": {}}))
    with pytest.raises(TypeError, match="not all inherited fields"):
        attrs.define(kw_only=True, field_transformer=place_groups(("noise_s", ("no_such_field",))))(
            type("Bad", (SharedModelFields,), {"__annotations__": {}}))


def test_train_help_lists_the_model_flags_in_order_with_the_shared_docstrings(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as info:
        parse_train_argv(["--model-name", "groot_n1_7", "--help"], environ={})
    assert info.value.code == 0
    text = capsys.readouterr().out
    flags = list(dict.fromkeys(re.findall(r"--model\.(?!no-)([a-z0-9-]+)", text)))
    assert flags == [name.replace("_", "-") for name in N17_MODEL]
    data = [f for f in dict.fromkeys(re.findall(r"--data\.(?!no-)([a-z0-9-]+)", text)) if f.replace("-", "_") in DATA]
    assert data == [name.replace("_", "-") for name in DATA]
    flat = " ".join(text.split())
    for doc in ("See noise_beta_alpha (t stays below 1).", "Explicit projector slot; unset: the slot of",
                "DiT blocks: odd ones self-attend over [state; actions]"):
        assert doc in flat, doc
