"""SmolVLA checkpoints: the full-size build (parameter count, lerobot key coverage), lerobot folders, our own
layout, the strict report, fewer expert layers, the language head, and what trains."""

from __future__ import annotations

import re

import pytest
import torch
from safetensors.torch import load_file, save_file

from embodied_core.errors import CheckpointError
from embodied_models.smolvla.checkpoint import key_map, load_smolvla_checkpoint
from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig
from embodied_models.smolvla.modeling import SmolVLAModel
from tests.models.test_smolvla_golden import FIXTURE, fixture_configs, one_thread  # noqa: F401

OFFICIAL_PARAMS = 450_046_176
"""Tensors of lerobot/smolvla_base's model.safetensors, counted once each: vision encoder 86,433,024 + connector
11,796,480 + token embedding 47,308,800 + 16 text layers 157,317,120 + final norm 960 + language head 47,308,800
(the VLM: 350,165,184) + action expert 98,245,840 (8 joint layers of 6,268,320, 8 cross layers of 6,012,320, norm)
+ state/action/time projections 1,635,152."""


@pytest.fixture(scope="module")
def reference_state() -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in load_file(FIXTURE / "model.safetensors").items()}


def _tiny(**model: object) -> SmolVLAModel:
    model_cfg, data_cfg = fixture_configs(**model)
    return SmolVLAModel(model_cfg, data_cfg)


def _assert_same_weights(model: SmolVLAModel, other: SmolVLAModel) -> None:
    theirs = other.state_dict()
    assert model.state_dict().keys() == theirs.keys()
    for key, value in model.state_dict().items():
        assert torch.equal(value, theirs[key]), key


def test_full_size_builds_on_meta_with_the_official_count_and_keys(reference_state):
    with torch.device("meta"):
        model = SmolVLAModel(SmolVLAModelConfig(), SmolVLADataConfig(camera_keys=["a", "b"], state_dim=6,
                                                                     action_dim=6))
    assert sum(p.numel() for p in model.parameters()) == OFFICIAL_PARAMS
    expert = sum(p.numel() for n, p in model.named_parameters() if ".expert." in n or n.startswith("expert_norm"))
    assert expert == 98_245_840
    # lerobot's default fine-tuning trains the expert and the state/action/time projections only
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == expert + 1_635_152
    # every key of a 16-layer smolvla_base checkpoint (12 vision layers) maps one-to-one onto our names
    templates = {re.sub(r"\.layers\.\d+\.", ".layers.{i}.", f"model.{k}") for k in reference_state}
    keys = set()
    for template in templates:
        depth = 12 if "vision_model" in template else 16
        keys.update(template.format(i=i) for i in range(depth)) if "{i}" in template else keys.add(template)
    mapping = key_map(model.config)
    mapped = [mapping.target(k) for k in keys]
    assert None not in mapped
    assert sorted(name for name, _ in mapped) == sorted(model.state_dict())
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes["layers.1.expert.self_attn.k_proj.weight"] == (320, 320)  # cross layer: reads VLM keys
    assert shapes["layers.0.expert.self_attn.k_proj.weight"] == (320, 720)  # joint layer
    assert shapes["layers.15.expert.mlp.gate_proj.weight"] == (2048, 720)
    assert shapes["connector.modality_projection.proj.weight"] == (960, 12288)
    assert shapes["vision_model.embeddings.position_embedding.weight"] == (1024, 768)


def test_lerobot_pretrained_model_folder_loads(reference_state, tmp_path):
    folder = tmp_path / "run" / "pretrained_model"  # what lerobot's save_pretrained writes
    folder.mkdir(parents=True)
    save_file({f"model.{k}": v for k, v in reference_state.items()}, folder / "model.safetensors")
    model = _tiny()
    report = load_smolvla_checkpoint(model, tmp_path / "run")
    assert report.ok and len(report.loaded) == len(reference_state)
    reference = _tiny()
    load_smolvla_checkpoint(reference, FIXTURE / "model.safetensors")
    _assert_same_weights(model, reference)


def test_own_layout_round_trip(tmp_path):
    torch.manual_seed(0)
    model = _tiny()
    save_file(model.state_dict(), tmp_path / "model.safetensors")
    other = _tiny()
    assert load_smolvla_checkpoint(other, tmp_path / "model.safetensors").ok
    _assert_same_weights(model, other)


def test_strict_report_names_every_problem(reference_state):
    state = dict(reference_state)
    del state["action_out_proj.bias"]
    state["vlm_with_expert.vlm.model.text_model.layers.4.mlp.up_proj.weight"] = torch.zeros(128, 64)  # a cut layer
    state["state_proj.weight"] = torch.zeros(64, 8)
    with pytest.raises(CheckpointError) as info:
        load_smolvla_checkpoint(_tiny(), state)
    message = str(info.value)
    assert "missing: action_out_proj.bias" in message
    assert "unexpected: vlm_with_expert.vlm.model.text_model.layers.4.mlp.up_proj.weight" in message
    assert "state_proj.weight (model (64, 10), checkpoint state_proj.weight (64, 8))" in message
    assert "num_vlm_layers" in message  # the hint names the sizes to check


def test_fewer_expert_layers_pair_with_every_other_vlm_layer(reference_state):
    model = _tiny(num_expert_layers=2)
    names = [n for n, _ in model.named_parameters()]
    assert any(n.startswith("layers.2.expert.") for n in names)
    assert not any(n.startswith(("layers.1.expert.", "layers.3.expert.")) for n in names)
    target = key_map(model.config).target("model.vlm_with_expert.lm_expert.layers.1.mlp.up_proj.weight")
    assert target is not None and target[0] == "layers.2.expert.mlp.up_proj.weight"
    # the fixture's 4 expert layers do not fit: layers 2 and 3 of its expert are unexpected, shapes differ
    with pytest.raises(CheckpointError, match=r"vlm_with_expert\.lm_expert\.layers\.3\."):
        load_smolvla_checkpoint(model, reference_state)


def test_language_head_is_kept_frozen_or_dropped(reference_state):
    kept = _tiny()
    assert not kept.lm_head.weight.requires_grad
    dropped = _tiny(keep_lm_head=False)
    assert dropped.lm_head is None
    report = load_smolvla_checkpoint(dropped, reference_state)
    assert report.ok and report.ignored == ["vlm_with_expert.vlm.lm_head.weight"]
    assert sum(p.numel() for p in kept.parameters()) - sum(p.numel() for p in dropped.parameters()) == 128 * 64


def test_what_trains():
    frozen = {n for n, p in _tiny().named_parameters() if not p.requires_grad}
    trainable = {n for n, p in _tiny().named_parameters() if p.requires_grad}
    # default (lerobot's fine-tuning): the whole VLM is frozen; the expert and the projections train
    assert all(n.startswith(("layers.", "expert_norm", "state_proj", "action_")) for n in trainable)
    assert not any(".vlm." in n for n in trainable)
    assert {"vision_model.post_layernorm.weight", "embed_tokens.weight", "lm_head.weight"} <= frozen
    everything = _tiny(train_expert_only=False, freeze_vision_encoder=False)
    frozen = sorted(n for n, p in everything.named_parameters() if not p.requires_grad)
    # only what no loss reaches: after the last layer the expert reads, the VLM output feeds nothing
    last = "layers.3.vlm."
    assert frozen == sorted(["lm_head.weight", "vlm_norm.weight",
                             *(f"{last}{m}.weight" for m in ("self_attn.q_proj", "self_attn.o_proj",
                                                             "post_attention_layernorm", "mlp.gate_proj",
                                                             "mlp.up_proj", "mlp.down_proj"))])
    no_state = _tiny(train_state_proj=False)
    assert not no_state.state_proj.weight.requires_grad


def test_interface_lists():
    model = _tiny(train_expert_only=False, freeze_vision_encoder=False)
    assert {cls.__name__ for cls in model.fsdp_units()} == {"SmolVLALayer", "SmolVLMEncoderLayer"}
    no_decay = set(model.no_weight_decay())
    assert {"embed_tokens.weight", "action_in_proj.bias", "layers.0.vlm.input_layernorm.weight",
            "vision_model.embeddings.position_embedding.weight", "expert_norm.weight"} <= no_decay
    assert "layers.0.expert.self_attn.q_proj.weight" not in no_decay
    modules = dict(model.named_modules())
    import fnmatch

    targets = {name for name in modules for pattern in model.default_lora_targets()
               if fnmatch.fnmatchcase(name, pattern)}
    assert targets == {*(f"layers.{i}.expert.self_attn.{p}_proj" for i in range(4) for p in "qv"),
                       "state_proj", "action_in_proj", "action_out_proj", "action_time_mlp_in",
                       "action_time_mlp_out"}
    assert all(isinstance(modules[name], torch.nn.Linear) for name in targets)
