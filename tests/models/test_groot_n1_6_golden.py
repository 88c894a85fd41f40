"""GR00T N1.6 against LoongForge's own ``groot_n1_6`` (``../shared/fixtures/groot_n1_6_loongforge``, c6275661).

The fixture's complete ``Gr00tN1d6`` state dict (the official N1.6 key layout, SigLIP2's pooling head included) goes
through the model's strict loader. Contract 1, the action head with backbone features given: the training forward
with the recorded noise and time draws, and 4-step sampling. Contract 2, backbone + head end to end from token ids,
attention mask and the pixel list (two images of different sizes, windowed SigLIP2 layers with 2-D RoPE, left
padding). Eval mode (DiT dropout off). README tolerance: atol = rtol = 1e-5; backbone features on real tokens only.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
import torch
from safetensors.torch import load_file

from embodied_models.groot.head import ActionHeadInputs
from embodied_models.groot_n1_6.checkpoint import KEY_MAP, KEY_MAP_WITHOUT_POOLING_HEAD, map_key
from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig
from embodied_models.groot_n1_6.modeling import GrootN16Model
from tests.support import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "groot_n1_6_loongforge"
REPO_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TOL = {"atol": 1e-5, "rtol": 1e-5}


def fixture_model_config(doc: dict) -> GrootN16ModelConfig:
    """Our model section at the sizes of a fixture's ``config.json`` (LoongForge field names)."""
    head, dit, eagle = doc["model_config"], doc["model_config"]["diffusion_model_cfg"], doc["eagle_config"]
    vision, text = eagle["vision_config"], eagle["text_config"]
    return GrootN16ModelConfig(
        vocab_size=text["vocab_size"], llm_width=text["hidden_size"], llm_mlp_dim=text["intermediate_size"],
        llm_num_heads=text["num_attention_heads"], llm_num_kv_heads=text["num_key_value_heads"],
        llm_head_dim=text["head_dim"], select_layer=head["select_layer"], rms_norm_eps=text["rms_norm_eps"],
        rope_theta=text["rope_theta"], vision_depth=vision["num_hidden_layers"], vision_width=vision["hidden_size"],
        vision_mlp_dim=vision["intermediate_size"], vision_num_heads=vision["num_attention_heads"],
        vision_patch_size=vision["patch_size"], vision_num_patches=vision["num_patches"],
        vision_window_size=vision["window_size"], vision_full_attention_layers=vision["full_attention_indexes"],
        vision_windowed_attention=vision["use_windows_attn"], vision_rope=vision["use_rope"],
        vision_layer_norm_eps=vision["layer_norm_eps"], tune_top_llm_layers=0,
        hidden_size=head["hidden_size"], input_embedding_dim=head["input_embedding_dim"],
        max_state_dim=head["max_state_dim"], max_action_dim=head["max_action_dim"],
        action_horizon=head["action_horizon"], max_num_embodiments=head["max_num_embodiments"],
        max_seq_len=head["max_seq_len"], attend_text_every_n_blocks=head["attend_text_every_n_blocks"],
        num_inference_steps=head["num_inference_timesteps"], dit_num_layers=dit["num_layers"],
        dit_num_heads=dit["num_attention_heads"], dit_head_dim=dit["attention_head_dim"], dropout=dit["dropout"])


def fixture_model(folder) -> GrootN16Model:
    """A GrootN16Model at the fixture's sizes with its weights loaded strictly (eval mode)."""
    doc = json.loads((folder / "config.json").read_text())
    config = fixture_model_config(doc)
    assert config.hidden_size == doc["model_config"]["diffusion_model_cfg"]["output_dim"]
    head = doc["model_config"]
    data = GrootN16DataConfig(camera_keys=["cam"], state_dim=head["state_dim"], action_dim=head["action_dim"],
                              action_horizon=head["action_horizon"], image_size=(16, 16), embodiment_id=0)
    model = GrootN16Model(config, data).eval()
    report = model.load_pretrained_checkpoint(folder / "model.safetensors")
    assert report.ok and len(report.loaded) == len(model.state_dict())
    return model


@pytest.fixture(scope="module")
def golden():
    model = fixture_model(FIXTURE)
    return model, load_file(FIXTURE / "inputs.safetensors"), load_file(FIXTURE / "expected.safetensors")


def test_the_official_key_layout_maps_with_the_declared_drops():
    """The fixture is a complete Gr00tN1d6 state dict: SigLIP2's pooling head maps onto ``backbone.vision.head.*``
    (model.vision_pooling_head=true, the default) and only the tied LM head is dropped; with the switch off the
    pooling head's 11 tensors are declared drops too."""
    state = load_file(FIXTURE / "model.safetensors")
    assert map_key("backbone.model.mlp1.3.weight") == "backbone.projector.3.weight"
    assert map_key("model.backbone.model.language_model.model.norm.weight") == "backbone.norm.weight"
    assert map_key("backbone.model.vision_model.vision_model.head.probe") == "backbone.vision.head.probe"
    dropped = sorted(k for k in state if KEY_MAP.is_ignored(k) or KEY_MAP.tie(k))
    assert dropped == ["backbone.model.language_model.lm_head.weight"]
    headless = KEY_MAP_WITHOUT_POOLING_HEAD
    dropped = sorted(k for k in state if headless.target(k) is None and (headless.is_ignored(k) or headless.tie(k)))
    assert dropped[0] == "backbone.model.language_model.lm_head.weight"
    assert all(".vision_model.head." in k for k in dropped[1:]) and len(dropped) == 12


def test_action_head_training_forward_matches_the_reference(golden):
    model, inputs, expected = golden
    head_inputs = ActionHeadInputs(features=inputs["backbone_features"],
                                   attention_mask=inputs["backbone_attention_mask"], image_mask=inputs["image_mask"],
                                   state=inputs["state"], embodiment_id=inputs["embodiment_id"])
    with torch.no_grad():
        out = model.action_head.training_terms(head_inputs, inputs["action"], inputs["action_mask"],
                                               noise=inputs["noise"], t=inputs["t"])
    assert torch.equal(out["buckets"], expected["debug.t_bucket"])
    for ours, theirs in (("context", "debug.vl_embeds"), ("state_token", "debug.state_features"),
                         ("x_t", "debug.x_t"), ("velocity_target", "debug.velocity_target"),
                         ("pred_velocity", "pred_velocity"), ("action_loss", "action_loss"), ("loss", "loss")):
        torch.testing.assert_close(out[ours], expected[theirs], **TOL, msg=ours)
    pred = model.action_head.sample(head_inputs, inputs["sample_init_noise"], model.config.num_inference_steps)
    torch.testing.assert_close(pred, expected["action_pred"], **TOL)


def _vl(model: GrootN16Model, inputs: dict[str, torch.Tensor]) -> ActionHeadInputs:
    pixels = [inputs[f"vl.pixel_values.{i}"][0] for i in range(2)]
    ids = inputs["vl.input_ids"]
    mask = inputs["vl.attention_mask"] == 1
    return model.pixel_head_inputs(pixels, ids, mask, ids == 120, inputs["vl.state"], inputs["vl.embodiment_id"])


def test_backbone_and_head_end_to_end_match_the_reference(golden):
    model, inputs, expected = golden
    real = inputs["vl.attention_mask"] == 1
    with torch.no_grad():
        pixels = [inputs[f"vl.pixel_values.{i}"][0] for i in range(2)]
        towers = model.backbone.vision(pixels)
        torch.testing.assert_close(torch.cat(towers)[None], expected["vl.debug.vision_tokens"], **TOL)
        torch.testing.assert_close(model.backbone.image_tokens(pixels)[None], expected["vl.debug.vit_embeds"], **TOL)
        head_inputs = _vl(model, inputs)
        torch.testing.assert_close(head_inputs.features[real], expected["vl.backbone_features"][real], **TOL)
        assert torch.equal(head_inputs.image_mask, expected["vl.image_mask"])
        assert torch.equal(head_inputs.attention_mask, expected["vl.backbone_attention_mask"])
        out = model.action_head.training_terms(head_inputs, inputs["vl.action"], inputs["vl.action_mask"],
                                               noise=inputs["vl.noise"], t=inputs["vl.t"])
    torch.testing.assert_close(out["context"][real], expected["vl.debug.vl_embeds"][real], **TOL)
    for ours, theirs in (("state_token", "vl.debug.state_features"), ("x_t", "vl.debug.x_t"),
                         ("pred_velocity", "vl.pred_velocity"), ("action_loss", "vl.action_loss"),
                         ("loss", "vl.loss")):
        torch.testing.assert_close(out[ours], expected[theirs], **TOL, msg=ours)
    pred = model.action_head.sample(head_inputs, inputs["vl.sample_init_noise"], 4)
    torch.testing.assert_close(pred, expected["vl.action_pred"], **TOL)


def test_the_fixture_is_sensitive_to_windows_rope_and_eval_mode(golden):
    """Whole-image attention in every layer, or no RoPE, moves the vision tokens, and train mode (DiT dropout 0.2)
    moves the velocity: the golden checks all three."""
    model, inputs, expected = golden
    pixels = [inputs[f"vl.pixel_values.{i}"][0] for i in range(2)]
    vision = model.backbone.vision
    for attribute, value in (("windowed", [False] * len(vision.windowed)),
                             ("config", attrs.evolve(vision.config, vision_rope=False))):
        saved = getattr(vision, attribute)
        setattr(vision, attribute, value)
        try:
            with torch.no_grad():
                tokens = torch.cat(vision(pixels))[None]
        finally:
            setattr(vision, attribute, saved)
        assert (tokens - expected["vl.debug.vision_tokens"]).abs().max() > 1e-2, attribute
    head_inputs = ActionHeadInputs(features=inputs["backbone_features"],
                                   attention_mask=inputs["backbone_attention_mask"], image_mask=inputs["image_mask"],
                                   state=inputs["state"], embodiment_id=inputs["embodiment_id"])
    model.train()
    try:
        with torch.no_grad():
            out = model.action_head.training_terms(head_inputs, inputs["action"], inputs["action_mask"],
                                                   noise=inputs["noise"], t=inputs["t"])
    finally:
        model.eval()
    assert (out["pred_velocity"] - expected["pred_velocity"]).abs().max() > 1e-3


# ---------------------------------------------------------------------------------------------------------- sizes
SIZES = REPO_FIXTURES / "groot_n1_6_sizes"


@pytest.fixture(scope="module")
def sizes():
    model = fixture_model(SIZES)
    return model, load_file(SIZES / "inputs.safetensors"), load_file(SIZES / "expected.safetensors")


def test_a_second_golden_at_other_sizes_matches_the_reference(sizes):
    """tests/fixtures/groot_n1_6_sizes (benchmarks/groot_n1_6_second_golden.py): window 3 with partial tiles, the
    full-attention layer last, 4 image sizes (two alike in one element), select_layer 3 of 5, RoPE theta 500, 4 DiT
    blocks, horizon 12, 5 sampling steps; float16-exact weights, uint8 images through the model's normalization."""
    model, inputs, expected = sizes
    doc = json.loads((SIZES / "config.json").read_text())
    count = sum(1 for k in inputs if k.startswith("images."))
    pixels = [model.backbone.normalize(inputs[f"images.{i}"][None])[0] for i in range(count)]
    ids, real = inputs["input_ids"], inputs["attention_mask"] == 1
    image_mask = ids == doc["eagle_config"]["image_token_index"]
    with torch.no_grad():
        torch.testing.assert_close(torch.cat(model.backbone.vision(pixels))[None], expected["vision_tokens"], **TOL)
        torch.testing.assert_close(model.backbone.image_tokens(pixels)[None], expected["vit_embeds"], **TOL)
        head_inputs = model.pixel_head_inputs(pixels, ids, real, image_mask, inputs["state"], inputs["embodiment_id"])
        torch.testing.assert_close(head_inputs.features[real], expected["backbone_features"][real], **TOL)
        out = model.action_head.training_terms(head_inputs, inputs["action"], inputs["action_mask"],
                                               noise=inputs["noise"], t=inputs["t"])
    assert torch.equal(out["buckets"], expected["t_bucket"])
    torch.testing.assert_close(out["context"][real], expected["vl_embeds"][real], **TOL)
    for ours, theirs in (("state_token", "state_features"), ("pred_velocity", "pred_velocity"),
                         ("action_loss", "action_loss"), ("loss", "loss")):
        torch.testing.assert_close(out[ours], expected[theirs], **TOL, msg=ours)
    pred = model.action_head.sample(head_inputs, inputs["sample_init_noise"], model.config.num_inference_steps)
    torch.testing.assert_close(pred, expected["action_pred"], **TOL)
