"""FastWAM against a second lerobot 0.6.1 golden at other settings than the shared fixture (tests/fixtures/
fastwam_h3_noproprio, written by benchmarks/fastwam_second_golden.py): 3 heads x 8, 3 layers, patch (1, 1, 2), no
proprio token (model.use_proprio=false), a masked context, other shifts, 500 training timesteps, other loss lambdas,
lerobot's seeded sampling noise (model.inference_seed) and a per_frame_causal training case. Tolerance: the shared
fixture's (atol = rtol = 1e-5)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from embodied_core.config.resolve import load_config
from embodied_models.fastwam.modeling import build_model
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "fastwam_h3_noproprio"
TOL = {"atol": 1e-5, "rtol": 1e-5}
MODEL = {"in_channels": 4, "out_channels": 4, "num_heads": 3, "attn_head_dim": 8, "num_layers": 3,
         "video_hidden_dim": 24, "video_ffn_dim": 32, "video_freq_dim": 8, "action_hidden_dim": 16,
         "action_ffn_dim": 24, "action_freq_dim": 10, "text_dim": 12, "eps": 1e-5, "patch_size": [1, 1, 2],
         "video_train_shift": 3.0, "video_infer_shift": 2.5, "action_train_shift": 7.0, "action_infer_shift": 2.0,
         "num_train_timesteps": 500, "lambda_video": 0.5, "lambda_action": 2.0, "num_inference_steps": 3,
         "use_proprio": False, "inference_seed": 7}
DATA = {"action_dim": 5, "state_dim": 3, "text_dim": 12, "action_horizon": 12, "num_video_frames": 13,
        "action_video_freq_ratio": 1}
DRAWS = ("noise_video", "u_video", "noise_action", "u_action")
TRAIN_KEYS = ("loss", "loss_video", "loss_action", "pred_video", "pred_action", "t_video", "t_action",
              "noisy_video", "noisy_action")


def _model(**model):
    cfg = load_config(training={"model_name": "fastwam_tiny"}, model={**MODEL, **model}, data=DATA)
    net = build_model(cfg.model, cfg.data)
    report = net.load_pretrained_checkpoint(FIXTURE / "model.safetensors")
    assert report.ok and net.proprio_encoder is None
    return net


@pytest.fixture(scope="module")
def fixture():
    # Cloned: safetensors tensors may sit at unaligned addresses (the shared fixture's README).
    inputs = {k: v.clone() for k, v in load_file(str(FIXTURE / "inputs.safetensors")).items()}
    return inputs, load_file(str(FIXTURE / "expected.safetensors"))


def _train_batch(inputs):
    return {"latents": inputs["train.latents"], "context": inputs["context"], "context_mask": inputs["context_mask"],
            "action": inputs["train.action"], "action_is_pad": inputs["train.action_is_pad"],
            "image_is_pad": inputs["train.image_is_pad"]}


def _diffs(out, expected, prefix):
    return {k: (out[k].float() - expected[f"{prefix}.{k}"].float()).abs().max().item() for k in TRAIN_KEYS}


@pytest.mark.parametrize("mode", ["first_frame_causal", "per_frame_causal"])
def test_training_matches_lerobot(fixture, mode):
    inputs, expected = fixture
    model = _model(video_attention_mask_mode=mode)
    torch.manual_seed(5)  # the generator's train_seed: our draws replay lerobot's, in its order
    out = model.training_outputs(_train_batch(inputs))
    for name in DRAWS:
        assert torch.equal(out[name], inputs[f"train.{name}"]), name
    prefix = "train" if mode == "first_frame_causal" else "per_frame_causal"
    diffs = _diffs(out, expected, prefix)
    print(f"fastwam second golden ({mode}) max|diff|:", {k: f"{v:.1e}" for k, v in diffs.items()})
    for key in TRAIN_KEYS:
        torch.testing.assert_close(out[key].float(), expected[f"{prefix}.{key}"].float(), **TOL, msg=key)


def test_sampling_with_lerobots_seeded_noise(fixture):
    inputs, expected = fixture
    model = _model().eval()
    batch = {"latents": inputs["sample.first_frame_latents"], "context": inputs["context"],
             "context_mask": inputs["context_mask"]}
    seeded = model.sample_actions(batch)  # model.inference_seed=7: lerobot's noise, the same for both elements
    given = model.sample_actions(batch, noise=inputs["sample.init_noise"].expand(2, -1, -1))
    print(f"fastwam second golden sampling max|diff| {(seeded - expected['sample.action']).abs().max().item():.1e}")
    torch.testing.assert_close(seeded, expected["sample.action"], **TOL)
    torch.testing.assert_close(given, seeded, atol=0, rtol=0)
