"""GR00T N1.7 checkpoint layouts through the key map with a strict report: the official Hugging Face folder
(config.json ``Gr00tN1d7``, sharded safetensors with an index), lerobot's ``_groot_model.`` policy folder, our own
names; sizes in config.json that disagree with the model, and stray keys, are errors naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from embodied_core.config.resolve import load_config
from embodied_core.errors import CheckpointError
from embodied_models.groot_n1_7.checkpoint import map_key
from embodied_models.groot_n1_7.modeling import GrootN17Model, build_model

DATA = {"state_dim": 6, "action_dim": 5, "camera_keys": ["cam"]}


def _model(seed: int) -> GrootN17Model:
    config = load_config("groot_n1_7_tiny", training={"dataset_format": "dummy_datasets"}, data=DATA)
    torch.manual_seed(seed)
    return build_model(config.model, config.data)


def _official_names(state: dict[str, torch.Tensor], *, inner: str = "model.") -> dict[str, torch.Tensor]:
    """Our state dict in the official layout (Isaac-GR00T's Qwen3Backbone around Qwen3VLForConditionalGeneration)."""
    out = {}
    for key, value in state.items():
        if key.startswith("backbone.visual."):
            out[f"backbone.model.{inner}visual." + key.removeprefix("backbone.visual.")] = value
        elif key.startswith("backbone."):
            out[f"backbone.model.{inner}language_model." + key.removeprefix("backbone.")] = value
        else:
            out[key] = value
    width = state["backbone.embed_tokens.weight"].shape[1]
    out[f"backbone.model.{inner}language_model.norm.weight"] = torch.ones(width)
    return out


def _official_config(model: GrootN17Model, **changes) -> dict:
    cfg = model.config
    doc = {"model_type": "Gr00tN1d7", "architectures": ["Gr00tN1d7"], "model_name": "nvidia/Cosmos-Reason2-2B",
           "select_layer": cfg.select_layer, "backbone_embedding_dim": cfg.llm_width, "hidden_size": cfg.hidden_size,
           "input_embedding_dim": cfg.input_embedding_dim, "max_state_dim": cfg.max_state_dim,
           "max_action_dim": cfg.max_action_dim, "action_horizon": cfg.action_horizon,
           "max_num_embodiments": cfg.max_num_embodiments, "max_seq_len": cfg.max_seq_len,
           "diffusion_model_cfg": {"num_layers": cfg.dit_num_layers, "num_attention_heads": cfg.dit_num_heads,
                                   "attention_head_dim": cfg.dit_head_dim, "output_dim": cfg.hidden_size},
           "vl_self_attention_cfg": {"num_layers": cfg.vl_num_layers, "num_attention_heads": cfg.vl_num_heads,
                                     "attention_head_dim": cfg.vl_head_dim}}
    doc.update(changes)
    return doc


def _write_sharded(folder: Path, state: dict[str, torch.Tensor], config: dict) -> Path:
    folder.mkdir(parents=True)
    keys = sorted(state)
    shards = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
    weight_map = {}
    for name, part in shards.items():
        save_file({k: state[k].contiguous() for k in part}, str(folder / name))
        weight_map.update(dict.fromkeys(part, name))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _assert_same_weights(a: GrootN17Model, b: GrootN17Model) -> None:
    sb = b.state_dict()
    for key, value in a.state_dict().items():
        assert torch.equal(value, sb[key]), key


def test_official_sharded_folder_loads_strictly(tmp_path):
    source = _model(1)
    state = _official_names(source.state_dict())
    state["backbone.model.lm_head.weight"] = state["backbone.model.model.language_model.embed_tokens.weight"].clone()
    folder = _write_sharded(tmp_path / "GR00T-N1.7-3B", state, _official_config(source))
    target = _model(2)
    report = target.load_pretrained_checkpoint(folder)
    assert report.ok and len(report.loaded) == len(target.state_dict())
    assert set(report.ignored) == {"backbone.model.model.language_model.norm.weight", "backbone.model.lm_head.weight"}
    _assert_same_weights(source, target)


def test_lerobot_policy_folder_with_a_tied_lm_head_only(tmp_path):
    """lerobot's ``_groot_model.`` prefix, the Qwen3-VL layout without the inner ``model.`` level, and a file that
    stores the tied LM head instead of the embedding table."""
    source = _model(3)
    state = _official_names(source.state_dict(), inner="")
    state["backbone.model.lm_head.weight"] = state.pop("backbone.model.language_model.embed_tokens.weight")
    (tmp_path / "policy" / "pretrained_model").mkdir(parents=True)
    save_file({f"_groot_model.{k}": v.contiguous() for k, v in state.items()},
              str(tmp_path / "policy" / "pretrained_model" / "model.safetensors"))
    target = _model(4)
    report = target.load_pretrained_checkpoint(tmp_path / "policy")
    assert report.ok and report.tied == ["_groot_model.backbone.model.lm_head.weight -> backbone.embed_tokens.weight"]
    _assert_same_weights(source, target)


def test_own_layout_round_trip(tmp_path):
    source = _model(5)
    save_file({k: v.contiguous() for k, v in source.state_dict().items()}, str(tmp_path / "model.safetensors"))
    target = _model(6)
    assert target.load_pretrained_checkpoint(tmp_path / "model.safetensors").ok
    _assert_same_weights(source, target)


def test_config_json_sizes_that_disagree_are_named(tmp_path):
    source = _model(7)
    doc = _official_config(source, select_layer=16, diffusion_model_cfg={"num_layers": 32, "num_attention_heads": 4,
                                                                        "attention_head_dim": 12, "output_dim": 32})
    folder = _write_sharded(tmp_path / "ckpt", _official_names(source.state_dict()), doc)
    with pytest.raises(CheckpointError, match=r"model\.select_layer=16 \(checkpoint\) vs 2.*model\.dit_num_layers=32"):
        _model(8).load_pretrained_checkpoint(folder)


def test_stray_and_missing_keys_are_listed(tmp_path):
    source = _model(9)
    state = _official_names(source.state_dict())
    state["backbone.model.model.language_model.layers.2.mlp.up_proj.weight"] = torch.zeros(128, 64)  # a 3rd layer
    del state["action_head.vlln.bias"]
    folder = _write_sharded(tmp_path / "ckpt", state, _official_config(source))
    with pytest.raises(CheckpointError) as info:
        _model(10).load_pretrained_checkpoint(folder)
    message = str(info.value)
    assert "unexpected: backbone.model.model.language_model.layers.2.mlp.up_proj.weight" in message
    assert "missing: action_head.vlln.bias" in message and "model.select_layer keeps" in message


def test_map_key_examples():
    assert map_key("backbone.model.model.visual.blocks.0.attn.qkv.weight") == "backbone.visual.blocks.0.attn.qkv.weight"
    assert map_key("_groot_model.backbone.model.language_model.layers.3.self_attn.q_proj.weight") == \
        "backbone.layers.3.self_attn.q_proj.weight"
    assert map_key("model.transformer_blocks.0.attn1.to_q.weight") == \
        "action_head.model.transformer_blocks.0.attn1.to_q.weight"
    assert map_key("action_head.state_encoder.layer1.W") == "action_head.state_encoder.layer1.W"
    assert map_key("backbone.model.lm_head.weight") is None  # tied source, not a rename
