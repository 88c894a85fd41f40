"""GR00T N1.6 checkpoint layouts through the key map with a strict report: the official Hugging Face folder
(config.json ``Gr00tN1d6``, sharded safetensors with an index, SigLIP2's unread pooling head, an LM head), the
``model.vision_pooling_head`` switch, LoongForge's ``model.``-prefixed policy state dict with a tied LM head only,
our own names; sizes in config.json that disagree with the model, and stray or missing keys, are errors naming
them."""

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


def _model(seed: int, **model) -> GrootN16Model:
    config = load_config("groot_n1_6_tiny", training={"dataset_format": "dummy_datasets"}, model=model, data=DATA)
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
    assert "backbone.model.vision_model.vision_model.head.probe" in state  # SigLIP2's pooling head, as released
    state["backbone.model.language_model.lm_head.weight"] = state[
        "backbone.model.language_model.model.embed_tokens.weight"].clone()
    folder = _write_sharded(tmp_path / "GR00T-N1.6-3B", state, official_config(source))
    target = _model(2)
    report = target.load_pretrained_checkpoint(folder)
    assert report.ok and len(report.loaded) == len(target.state_dict())
    assert "backbone.vision.head.attention.in_proj_weight" in report.loaded
    assert report.ignored == ["backbone.model.language_model.lm_head.weight"]
    _assert_same_weights(source, target)


def test_the_pooling_head_switch_decides_what_a_checkpoint_must_hold(tmp_path):
    """A checkpoint without SigLIP2's pooling head is an error naming model.vision_pooling_head=false; with that
    setting it loads, and an official checkpoint's head keys are dropped as declared (listed as ignored)."""
    source = _model(11)
    state = official_names(source.state_dict())
    headless = {k: v for k, v in state.items() if ".vision_model.head." not in k}
    save_file(headless, str(tmp_path / "headless.safetensors"))
    with pytest.raises(CheckpointError, match=r"(?s)missing: backbone\.vision\.head\.probe.*"
                                              r"set model\.vision_pooling_head=false"):
        _model(12).load_pretrained_checkpoint(tmp_path / "headless.safetensors")
    report = _model(12, vision_pooling_head=False).load_pretrained_checkpoint(tmp_path / "headless.safetensors")
    assert report.ok and not report.ignored
    save_file(state, str(tmp_path / "official.safetensors"))
    target = _model(13, vision_pooling_head=False)
    report = target.load_pretrained_checkpoint(tmp_path / "official.safetensors")
    assert report.ok and len(report.loaded) == len(target.state_dict())
    dropped = sorted(k for k in state if ".vision_model.head." in k)
    assert sorted(report.ignored) == dropped and len(dropped) == 11
    own = {k: v.contiguous() for k, v in source.state_dict().items()}
    report = _model(14, vision_pooling_head=False).load_pretrained_checkpoint(own)
    assert sorted(report.ignored) == sorted(k for k in own if k.startswith("backbone.vision.head."))
    with pytest.raises(CheckpointError, match=r"missing: backbone\.vision\.head\.probe"):
        _model(15).load_pretrained_checkpoint(headless, allow_missing=("backbone.vision.head.attention.*",))
    assert _model(15).load_pretrained_checkpoint(headless, allow_missing=("backbone.vision.head.*",)).missing


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
