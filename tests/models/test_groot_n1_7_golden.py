"""GR00T N1.7 action head against lerobot 0.6.1's ``GR00TN17ActionHead`` (../shared/fixtures/groot_n1_7_lerobot).

The fixture's weights go through the model's own strict loader (a bare head ``state_dict()``: its keys become
``action_head.*``, the backbone is allowed missing). Contract 1: the training forward with the recorded noise and
time draws (eval mode); contract 2: 4 Euler steps from the recorded initial noise. README tolerance: 1e-5.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from embodied_core.errors import CheckpointError
from embodied_models.groot_n1_7.action_head import ActionHeadInputs
from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig
from embodied_models.groot_n1_7.dit import block_kinds
from embodied_models.groot_n1_7.modeling import GrootN17Model
from tests.support import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "groot_n1_7_lerobot"
TOL = {"atol": 1e-5, "rtol": 1e-5}


def _model() -> GrootN17Model:
    """A GrootN17Model whose head has the fixture's sizes (from its config.json) on a toy backbone."""
    doc = json.loads((FIXTURE / "config.json").read_text())
    head, dit, vl = doc["action_head_config"], doc["action_head_config"]["diffusion_model_cfg"], \
        doc["action_head_config"]["vl_self_attention_cfg"]
    width = head["backbone_embedding_dim"]
    model_cfg = GrootModelConfig(
        vocab_size=300, llm_width=width, llm_mlp_dim=2 * width, llm_num_heads=4, llm_num_kv_heads=2,
        llm_head_dim=width // 4, mrope_section=[4, 2, 2], select_layer=1, vision_depth=1, vision_width=16,
        vision_mlp_dim=32, vision_num_heads=2, vision_patch_size=8, vision_num_position_embeddings=16,
        deepstack_layers=[], hidden_size=head["hidden_size"], input_embedding_dim=head["input_embedding_dim"],
        max_state_dim=head["max_state_dim"], max_action_dim=head["max_action_dim"],
        action_horizon=head["action_horizon"], max_num_embodiments=head["max_num_embodiments"],
        max_seq_len=head["max_seq_len"], attend_text_every_n_blocks=head["attend_text_every_n_blocks"],
        num_inference_steps=head["num_inference_timesteps"], dit_num_layers=dit["num_layers"],
        dit_num_heads=dit["num_attention_heads"], dit_head_dim=dit["attention_head_dim"],
        vl_num_layers=vl["num_layers"], vl_num_heads=vl["num_attention_heads"], vl_head_dim=vl["attention_head_dim"],
        dropout=dit["dropout"])
    assert model_cfg.hidden_size == dit["output_dim"] and block_kinds(4, 2) == ["text", "self", "image", "self"]
    assert doc["dit_block_kinds"] == ["cross_text", "self", "cross_image", "self"]
    data_cfg = GrootDataConfig(camera_keys=["cam"], state_dim=8, action_dim=7, action_horizon=head["action_horizon"],
                               image_size=(16, 16), embodiment_id=0)
    torch.manual_seed(0)
    return GrootN17Model(model_cfg, data_cfg).eval()


@pytest.fixture(scope="module")
def golden():
    model = _model()
    report = model.load_pretrained_checkpoint(FIXTURE / "model.safetensors", allow_missing=("backbone.*",))
    head_keys = set(load_file(FIXTURE / "model.safetensors"))
    assert {k.removeprefix("action_head.") for k in report.loaded} == head_keys
    assert report.missing and all(k.startswith("backbone.") for k in report.missing)
    inputs = load_file(FIXTURE / "inputs.safetensors")
    head_inputs = ActionHeadInputs(features=inputs["backbone_features"],
                                   attention_mask=inputs["backbone_attention_mask"], image_mask=inputs["image_mask"],
                                   state=inputs["state"], embodiment_id=inputs["embodiment_id"])
    return model, inputs, head_inputs, load_file(FIXTURE / "expected.safetensors")


def test_training_forward_matches_the_reference(golden):
    model, inputs, head_inputs, expected = golden
    with torch.no_grad():
        out = model.action_head.training_terms(head_inputs, inputs["action"], inputs["action_mask"],
                                               noise=inputs["noise"], t=inputs["t"])
    assert torch.equal(out["buckets"], expected["debug.t_bucket"])
    for ours, theirs in (("context", "debug.vl_embeds"), ("state_token", "debug.state_features"),
                         ("x_t", "debug.x_t"), ("velocity_target", "debug.velocity_target"),
                         ("pred_velocity", "pred_velocity"), ("action_loss", "action_loss"), ("loss", "loss")):
        torch.testing.assert_close(out[ours], expected[theirs], **TOL, msg=ours)


def test_sampling_matches_the_reference(golden):
    model, inputs, head_inputs, expected = golden
    pred = model.action_head.sample(head_inputs, inputs["sample_init_noise"], model.config.num_inference_steps)
    torch.testing.assert_close(pred, expected["action_pred"], **TOL)


def test_the_fixture_is_sensitive_to_the_masks_and_to_eval_mode(golden):
    """The alternating cross-attention masks and eval mode both change the result: the golden checks them."""
    model, inputs, head_inputs, expected = golden
    everything = ActionHeadInputs(features=head_inputs.features, attention_mask=torch.ones_like(
        head_inputs.attention_mask), image_mask=head_inputs.image_mask, state=head_inputs.state,
        embodiment_id=head_inputs.embodiment_id)
    pred = model.action_head.sample(everything, inputs["sample_init_noise"], 4)
    assert (pred - expected["action_pred"]).abs().max() > 1e-3
    model.train()
    try:
        out = model.action_head.training_terms(head_inputs, inputs["action"], inputs["action_mask"],
                                               noise=inputs["noise"], t=inputs["t"])
    finally:
        model.eval()
    assert (out["pred_velocity"] - expected["pred_velocity"]).abs().max() > 1e-3  # dropout 0.2 is on in train mode


def test_a_head_only_file_without_allowing_the_backbone_is_an_error():
    model = _model()
    with pytest.raises(CheckpointError, match=r"missing: backbone\.embed_tokens\.weight"):
        model.load_pretrained_checkpoint(FIXTURE / "model.safetensors")
