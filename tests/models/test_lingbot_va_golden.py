"""LingBot-VA against the lerobot 0.6.1 reference (../shared/fixtures/lingbot_va_lerobot, README inside).

Three contracts: the four-stream training forward (bf16 reference, compared in fp32 at the README's bf16-level
tolerance), the training loss with every random draw replayed (and re-drawn by our generator from the stored
seed), and the fp32 single-stream inference forward (1e-5). Weights go through our checkpoint key map with a
strict report. Regenerating the fixture needs lerobot 0.6.1; see the fixture's README.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
from safetensors.torch import load_file

from embodied_models.lingbot_va.checkpoint import load_state_strict, map_keys
from embodied_models.lingbot_va.config import LingBotVADataConfig, LingBotVAModelConfig
from embodied_models.lingbot_va.loss import action_loss, video_loss
from embodied_models.lingbot_va.masks import StreamLayout, dense_stream_mask
from embodied_models.lingbot_va.modeling import LingBotVAModel
from embodied_models.lingbot_va.rope import action_grid_ids, video_grid_ids
from embodied_models.lingbot_va.streams import draw_mask_params, draw_stream
from tests.support import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "lingbot_va_lerobot"

INFER_TOL = 1e-5
TRAIN_ATOL = 3e-2
LOSS_RTOL = 2e-3


@pytest.fixture(scope="module")
def fixture():
    cfg = json.loads((FIXTURE / "config.json").read_text())
    return cfg, load_file(str(FIXTURE / "inputs.safetensors")), load_file(str(FIXTURE / "expected.safetensors"))


@pytest.fixture(scope="module")
def model(fixture) -> LingBotVAModel:
    cfg, _, _ = fixture
    t = cfg["transformer"]
    model_config = LingBotVAModelConfig(
        patch_size=tuple(t["patch_size"]), num_attention_heads=t["num_attention_heads"],
        attention_head_dim=t["attention_head_dim"], in_channels=t["in_channels"], out_channels=t["out_channels"],
        action_dim=t["action_dim"], used_action_channel_ids=cfg["used_action_channel_ids"], text_dim=t["text_dim"],
        freq_dim=t["freq_dim"], ffn_dim=t["ffn_dim"], num_layers=t["num_layers"], eps=t["eps"],
        rope_theta=t["rope_theta"], snr_shift=cfg["snr_shift"], action_snr_shift=cfg["action_snr_shift"],
        noisy_cond_prob=cfg["noisy_cond_prob_video"], text_dropout_prob=0.0,
        chunk_size_range=tuple(cfg["chunk_size_range"]), window_size_range=tuple(cfg["window_size_range"]),
        attention_backend="sdpa")
    data_config = LingBotVADataConfig(num_latent_frames=cfg["num_latent_frames"],
                                      action_per_frame=cfg["action_per_frame"],
                                      action_horizon=cfg["num_latent_frames"] * cfg["action_per_frame"])
    model = LingBotVAModel(model_config, data_config).eval()
    weights = {k: v.float() for k, v in load_file(str(FIXTURE / "model.safetensors")).items()}
    report = load_state_strict(model.transformer, map_keys(weights, "lingbot_va"), source=str(FIXTURE))
    assert report.ok, report.describe()
    return model


def test_grid_ids_and_mask_match_reference(fixture):
    cfg, inputs, expected = fixture
    frames, h, w = cfg["num_latent_frames"], cfg["latent_height"] // 2, cfg["latent_width"] // 2
    assert torch.equal(video_grid_ids(frames, h, w), inputs["train.video.grid_id"][0])
    assert torch.equal(video_grid_ids(frames, h, w, frame_offset=cfg["infer_frame_st_id"]),
                       inputs["infer.video.grid_id"][0])
    assert torch.allclose(action_grid_ids(frames, cfg["action_per_frame"]), inputs["train.action.grid_id"][0])
    layout = StreamLayout(frames, h * w, cfg["action_per_frame"])
    mask = dense_stream_mask(layout, chunk_size=int(inputs["train.chunk_size"]),
                             window_size=int(inputs["train.window_size"]))
    for element in expected["debug.self_attn_mask"]:
        assert torch.equal(mask, element)


def test_inference_forward_fp32(model, fixture):
    _, inputs, expected = fixture
    with torch.no_grad():
        video = model.transformer(inputs["infer.video.noisy_latents"], inputs["infer.video.timesteps"],
                                  inputs["infer.video.grid_id"], inputs["infer.text_emb"])
        action = model.transformer(inputs["infer.action.noisy"], inputs["infer.action.timesteps"],
                                   inputs["infer.action.grid_id"], inputs["infer.text_emb"], action_mode=True)
    torch.testing.assert_close(video, expected["infer.video_pred"], atol=INFER_TOL, rtol=INFER_TOL)
    torch.testing.assert_close(action, expected["infer.action_pred"], atol=INFER_TOL, rtol=INFER_TOL)


def _train_forward(model, inputs, transformer=None):
    transformer = transformer or model.transformer
    with torch.no_grad():
        return transformer.forward_train(
            noisy_video=inputs["train.video.noisy_latents"].float(),
            clean_video=inputs["train.video.cond_latents"].float(),
            noisy_action=inputs["train.action.noisy"], clean_action=inputs["train.action.cond"],
            video_timesteps=inputs["train.video.timesteps"], clean_video_timesteps=inputs["train.video.cond_timesteps"],
            action_timesteps=inputs["train.action.timesteps"],
            clean_action_timesteps=inputs["train.action.cond_timesteps"],
            video_grid_ids=inputs["train.video.grid_id"], action_grid_ids=inputs["train.action.grid_id"],
            text=inputs["text_emb"].float(), chunk_size=int(inputs["train.chunk_size"]),
            window_size=int(inputs["train.window_size"]))


def test_training_forward_within_bf16_tolerance(model, fixture):
    _, inputs, expected = fixture
    video, action = _train_forward(model, inputs)
    torch.testing.assert_close(video, expected["train.video_pred"].float(), atol=TRAIN_ATOL, rtol=0)
    torch.testing.assert_close(action, expected["train.action_pred"].float(), atol=TRAIN_ATOL, rtol=0)
    grid = model.transformer.video_pred_to_grid(expected["train.video_pred"], 5, 4, 6)
    assert torch.equal(grid, expected["debug.train.video_pred_grid"])


def test_training_forward_in_bf16(model, fixture):
    """Run like the reference (whole transformer in bf16): lands closer than fp32 (measured 7.8e-3 both streams)."""
    _, inputs, expected = fixture
    bf16 = copy.deepcopy(model.transformer)
    torch.nn.Module.to(bf16, torch.bfloat16)  # nn.Module.to: diffusers' ModelMixin.to only adds a warning here
    video, action = _train_forward(model, inputs, bf16)
    assert video.dtype == torch.bfloat16
    torch.testing.assert_close(video.float(), expected["train.video_pred"].float(), atol=TRAIN_ATOL, rtol=0)
    torch.testing.assert_close(action.float(), expected["train.action_pred"].float(), atol=TRAIN_ATOL, rtol=0)


def test_generator_replays_reference_draws(model, fixture):
    """Our generator, seeded like the reference's global RNG, draws exactly the stored values."""
    cfg, inputs, expected = fixture
    gen = torch.Generator().manual_seed(int(inputs["draws.torch_manual_seed"]))
    video = draw_stream(inputs["draws.video.x0"], model.video_schedule, gen,
                        noisy_cond_prob=cfg["noisy_cond_prob_video"])
    mask = inputs["train.action.mask"]
    action = draw_stream(inputs["draws.action.x0"], model.action_schedule, gen, noisy_cond_prob=0.0, channel_mask=mask)
    chunk, window = draw_mask_params(gen, chunk_size_range=tuple(cfg["chunk_size_range"]),
                                     window_size_range=tuple(cfg["window_size_range"]))
    assert (chunk, window) == (int(inputs["train.chunk_size"]), int(inputs["train.window_size"]))
    assert torch.equal(video.ids, inputs["draws.video.timestep_ids"])
    assert torch.equal(video.cond_ids, inputs["draws.video.cond_timestep_ids"])
    assert torch.equal(action.ids, inputs["draws.action.timestep_ids"])
    assert torch.equal(video.noisy, inputs["train.video.noisy_latents"])
    assert torch.equal(video.clean, inputs["train.video.cond_latents"])
    assert torch.equal(video.timesteps, inputs["train.video.timesteps"])
    assert torch.equal(video.clean_timesteps, inputs["train.video.cond_timesteps"])
    assert torch.equal(action.noisy, inputs["train.action.noisy"])
    assert torch.equal(action.target, expected["train.action_target"])
    assert torch.equal(video.target, expected["train.video_target"])
    assert torch.equal(video.weight, expected["train.video_loss_weight"])
    assert torch.equal(action.weight, expected["train.action_loss_weight"])


def test_training_loss(model, fixture):
    _, inputs, expected = fixture
    # Loss function alone, on the reference's own predictions: matches to float rounding.
    latent = video_loss(expected["debug.train.video_pred_grid"], expected["train.video_target"],
                        expected["train.video_loss_weight"])
    act = action_loss(expected["debug.train.action_pred_grid"], expected["train.action_target"],
                      inputs["train.action.mask"], expected["train.action_loss_weight"])
    torch.testing.assert_close(latent, expected["train.latent_loss"], rtol=1e-5, atol=0)
    torch.testing.assert_close(act, expected["train.action_loss"], rtol=1e-5, atol=0)
    # End to end from the clean data through our generator, streams, fp32 forward and loss.
    batch = {"latents": inputs["draws.video.x0"], "actions": inputs["draws.action.x0"],
             "actions_mask": inputs["train.action.mask"], "text_emb": inputs["text_emb"].float()}
    model.seed_rng(int(inputs["draws.torch_manual_seed"]))
    with torch.no_grad():
        out = model(batch)
    torch.testing.assert_close(out.metrics["latent_loss"], expected["train.latent_loss"], rtol=LOSS_RTOL, atol=0)
    torch.testing.assert_close(out.metrics["action_loss"], expected["train.action_loss"], rtol=LOSS_RTOL, atol=0)
    torch.testing.assert_close(out.loss, expected["train.loss"], rtol=LOSS_RTOL, atol=0)
