"""GR00T N1.7's action head against a second lerobot 0.6.1 golden at other settings than the shared fixture
(tests/fixtures/groot_n1_7_text3, written by benchmarks/groot_n1_7_second_golden.py): a 6-block DiT of 2 x 8 with
attend_text_every_n_blocks=3, one VL self-attention block, 3 embodiment slots, 500 timestep buckets, 3 sampling
steps, masked action steps, B = 3. The weights go through the model's strict loader (a bare head state_dict, the
backbone allowed missing), as in test_groot_n1_7_golden.py. Tolerance: the shared fixture's (1e-5)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from embodied_models.groot_n1_7.action_head import ActionHeadInputs
from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig
from embodied_models.groot_n1_7.dit import block_kinds
from embodied_models.groot_n1_7.modeling import GrootN17Model
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "groot_n1_7_text3"
TOL = {"atol": 1e-5, "rtol": 1e-5}


@pytest.fixture(scope="module")
def golden():
    doc = json.loads((FIXTURE / "config.json").read_text())
    head = doc["action_head_config"]
    dit, vl = head["diffusion_model_cfg"], head["vl_self_attention_cfg"]
    width = head["backbone_embedding_dim"]
    model_cfg = GrootModelConfig(
        vocab_size=300, llm_width=width, llm_mlp_dim=2 * width, llm_num_heads=2, llm_num_kv_heads=1, llm_head_dim=8,
        mrope_section=[2, 1, 1], select_layer=1, vision_depth=1, vision_width=16, vision_mlp_dim=32,
        vision_num_heads=2, vision_patch_size=8, vision_num_position_embeddings=16, deepstack_layers=[],
        hidden_size=head["hidden_size"], input_embedding_dim=head["input_embedding_dim"],
        max_state_dim=head["max_state_dim"], max_action_dim=head["max_action_dim"],
        action_horizon=head["action_horizon"], max_num_embodiments=head["max_num_embodiments"],
        max_seq_len=head["max_seq_len"], attend_text_every_n_blocks=head["attend_text_every_n_blocks"],
        num_inference_steps=head["num_inference_timesteps"], num_timestep_buckets=head["num_timestep_buckets"],
        dit_num_layers=dit["num_layers"], dit_num_heads=dit["num_attention_heads"],
        dit_head_dim=dit["attention_head_dim"], vl_num_layers=vl["num_layers"], vl_num_heads=vl["num_attention_heads"],
        vl_head_dim=vl["attention_head_dim"], dropout=dit["dropout"])
    assert model_cfg.hidden_size == dit["output_dim"]
    kinds = block_kinds(dit["num_layers"], head["attend_text_every_n_blocks"])
    assert [k if k == "self" else f"cross_{k}" for k in kinds] == doc["dit_block_kinds"]
    data_cfg = GrootDataConfig(camera_keys=["cam"], state_dim=doc["real_state_dim"], action_dim=doc["real_action_dim"],
                               action_horizon=head["action_horizon"], image_size=(16, 16), embodiment_id=0)
    torch.manual_seed(0)
    model = GrootN17Model(model_cfg, data_cfg).eval()
    report = model.load_pretrained_checkpoint(FIXTURE / "model.safetensors", allow_missing=("backbone.*",))
    assert {k.removeprefix("action_head.") for k in report.loaded} == set(load_file(FIXTURE / "model.safetensors"))
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
    assert torch.equal(out["buckets"], expected["debug.t_bucket"])  # 500 buckets
    pairs = (("context", "debug.vl_embeds"), ("state_token", "debug.state_features"), ("action_loss", "action_loss"),
             ("loss", "loss"))
    print("groot_n1_7 second golden training max|diff|:",
          {ours: f"{(out[ours] - expected[theirs]).abs().max().item():.1e}" for ours, theirs in pairs})
    for ours, theirs in pairs:
        torch.testing.assert_close(out[ours], expected[theirs], **TOL, msg=ours)


def test_sampling_matches_the_reference(golden):
    model, inputs, head_inputs, expected = golden
    with torch.no_grad():
        pred = model.action_head.sample(head_inputs, inputs["sample_init_noise"], model.config.num_inference_steps)
    print(f"groot_n1_7 second golden sampling max|diff| {(pred - expected['action_pred']).abs().max().item():.1e}")
    torch.testing.assert_close(pred, expected["action_pred"], **TOL)
