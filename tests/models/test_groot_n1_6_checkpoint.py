"""GR00T N1.6 checkpoint layouts through the key map with a strict report: the official Hugging Face folder
(config.json ``Gr00tN1d6``, sharded safetensors with an index, SigLIP2's unread pooling head, an LM head), LoongForge's
``model.``-prefixed policy state dict with a tied LM head only, our own names; sizes in config.json that disagree
with the model, and stray or missing keys, are errors naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from embodied_core.config.resolve import load_config
from embodied_core.errors import CheckpointError
from embodied_models.groot_n1_6.modeling import GrootN16Model, build_model

DATA = {"state_dim": 6, "action_dim": 5, "camera_keys": ["cam"]}
_OFFICIAL_PREFIXES = (("backbone.vision.", "backbone.model.vision_model.vision_model."),
                      ("backbone.projector.", "backbone.model.mlp1."),
                      ("backbone.", "backbone.model.language_model.model."))


def official_names(state: dict[str, torch.Tensor], *, prefix: str = "") -> dict[str, torch.Tensor]:
    """Our state dict in the official Gr00tN1d6 layout (``prefix`` ``model.``: LoongForge's GrootN1d6Policy)."""
    out = {}
    for key, value in state.items():
        for ours, theirs in _OFFICIAL_PREFIXES:
            if key.startswith(ours):
                key = theirs + key.removeprefix(ours)
                break
        out[prefix + key] = value.contiguous()
    return out


def official_config(model: GrootN16Model, **changes) -> dict:
    """An official config.json for ``model``'s sizes (LoongForge's GrootN1d6ModelConfig field names)."""
    cfg = model.config
    doc = {"model_type": "Gr00tN1d6", "select_layer": cfg.select_layer, "backbone_embedding_dim": cfg.llm_width,
           "hidden_size": cfg.hidden_size, "input_embedding_dim": cfg.input_embedding_dim,
           "max_state_dim": cfg.max_state_dim, "max_action_dim": cfg.max_action_dim,
           "action_horizon": cfg.action_horizon, "max_num_embodiments": cfg.max_num_embodiments,
           "max_seq_len": cfg.max_seq_len, "use_alternate_vl_dit": True, "state_dropout_prob": 0.0,
           "diffusion_model_cfg": {"num_layers": cfg.dit_num_layers, "num_attention_heads": cfg.dit_num_heads,
                                   "attention_head_dim": cfg.dit_head_dim, "output_dim": cfg.hidden_size}}
    doc.update(changes)
    return doc


def _model(seed: int) -> GrootN16Model:
    config = load_config("groot_n1_6_tiny", training={"dataset_format": "dummy_datasets"}, data=DATA)
    torch.manual_seed(seed)
    return build_model(config.model, config.data)


def _write_sharded(folder: Path, state: dict[str, torch.Tensor], config: dict) -> Path:
    folder.mkdir(parents=True)
    keys = sorted(state)
    shards = {"model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
    weight_map = {}
    for name, part in shards.items():
        save_file({k: state[k] for k in part}, str(folder / name))
        weight_map.update(dict.fromkeys(part, name))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _assert_same_weights(a: GrootN16Model, b: GrootN16Model) -> None:
    sb = b.state_dict()
    for key, value in a.state_dict().items():
        assert torch.equal(value, sb[key]), key


def test_official_sharded_folder_loads_strictly(tmp_path):
    source = _model(1)
    state = official_names(source.state_dict())
    width = source.config.vision_width
    state["backbone.model.vision_model.vision_model.head.probe"] = torch.zeros(1, 1, width)
    state["backbone.model.language_model.lm_head.weight"] = state[
        "backbone.model.language_model.model.embed_tokens.weight"].clone()
    folder = _write_sharded(tmp_path / "GR00T-N1.6-3B", state, official_config(source))
    target = _model(2)
    report = target.load_pretrained_checkpoint(folder)
    assert report.ok and len(report.loaded) == len(target.state_dict())
    assert set(report.ignored) == {"backbone.model.vision_model.vision_model.head.probe",
                                   "backbone.model.language_model.lm_head.weight"}
    _assert_same_weights(source, target)


def test_loongforge_policy_state_with_a_tied_lm_head_only(tmp_path):
    """LoongForge's ``model.`` prefix, and a file storing the tied LM head instead of the embedding table."""
    source = _model(3)
    state = official_names(source.state_dict(), prefix="model.")
    state["model.backbone.model.language_model.lm_head.weight"] = state.pop(
        "model.backbone.model.language_model.model.embed_tokens.weight")
    save_file(state, str(tmp_path / "model.safetensors"))
    target = _model(4)
    report = target.load_pretrained_checkpoint(tmp_path / "model.safetensors")
    assert report.ok and report.tied == [
        "model.backbone.model.language_model.lm_head.weight -> backbone.embed_tokens.weight"]
    _assert_same_weights(source, target)


def test_own_layout_round_trip(tmp_path):
    source = _model(5)
    save_file({k: v.contiguous() for k, v in source.state_dict().items()}, str(tmp_path / "model.safetensors"))
    target = _model(6)
    assert target.load_pretrained_checkpoint(tmp_path / "model.safetensors").ok
    _assert_same_weights(source, target)


def test_config_json_sizes_that_disagree_are_named(tmp_path):
    source = _model(7)
    doc = official_config(source, select_layer=16, diffusion_model_cfg={"num_layers": 32, "num_attention_heads": 4,
                                                                        "attention_head_dim": 12, "output_dim": 32})
    folder = _write_sharded(tmp_path / "ckpt", official_names(source.state_dict()), doc)
    with pytest.raises(CheckpointError, match=r"model\.select_layer=16 \(checkpoint\) vs 2.*model\.dit_num_layers=32"):
        _model(8).load_pretrained_checkpoint(folder)


def test_stray_and_missing_keys_are_listed(tmp_path):
    source = _model(9)
    state = official_names(source.state_dict())
    state["backbone.model.language_model.model.layers.2.mlp.up_proj.weight"] = torch.zeros(96, 64)  # a 3rd layer
    del state["action_head.vlln.bias"]
    folder = _write_sharded(tmp_path / "ckpt", state, official_config(source))
    with pytest.raises(CheckpointError) as info:
        _model(10).load_pretrained_checkpoint(folder)
    text = str(info.value)
    assert "backbone.model.language_model.model.layers.2.mlp.up_proj.weight" in text
    assert "action_head.vlln.bias" in text
