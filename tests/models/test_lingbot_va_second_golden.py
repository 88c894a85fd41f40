"""LingBot-VA against a second lerobot 0.6.1 golden at other settings than the shared fixture (tests/fixtures/
lingbot_va_h3_nocrossnorm, written by benchmarks/lingbot_va_second_golden.py): 3 heads x 12, cross_attn_norm off,
patch (1, 1, 2), 48 latent channels, 6 action channels (3 used), 3 actions per frame, eps 1e-5, a training step
without noisy conditioning (chunk 1, window 6 over 6 frames), the fp32 single-stream forward, and the first chunk
of lerobot's KV-cached ``_infer`` with guidance on both streams, with and without ``video_exec_step``. Tolerances:
the shared fixture's (bf16 training forward 3e-2, losses 2e-3 relative, fp32 forwards 1e-5)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from embodied_models.lingbot_va.checkpoint import load_state_strict, map_keys
from embodied_models.lingbot_va.config import LingBotVADataConfig, LingBotVAModelConfig
from embodied_models.lingbot_va.modeling import LingBotVAModel
from embodied_models.lingbot_va.streams import draw_mask_params, draw_stream
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "lingbot_va_h3_nocrossnorm"
INFER_TOL, TRAIN_ATOL, LOSS_RTOL = 1e-5, 3e-2, 2e-3


def _pad(text: torch.Tensor) -> torch.Tensor:
    """The stored text embeddings (zero past their lengths, cut there) back at lerobot's 512 positions."""
    return torch.nn.functional.pad(text.float(), (0, 0, 0, 512 - text.shape[1]))


@pytest.fixture(scope="module")
def fixture():
    cfg = json.loads((FIXTURE / "config.json").read_text())
    return cfg, load_file(str(FIXTURE / "inputs.safetensors")), load_file(str(FIXTURE / "expected.safetensors"))


def _model(cfg, *, frames: int, **overrides) -> LingBotVAModel:
    t, p = cfg["transformer"], cfg["policy"]
    model_config = LingBotVAModelConfig(
        patch_size=tuple(t["patch_size"]), num_attention_heads=t["num_attention_heads"],
        attention_head_dim=t["attention_head_dim"], in_channels=t["in_channels"], out_channels=t["out_channels"],
        action_dim=t["action_dim"], used_action_channel_ids=p["used_action_channel_ids"], text_dim=t["text_dim"],
        freq_dim=t["freq_dim"], ffn_dim=t["ffn_dim"], num_layers=t["num_layers"], eps=t["eps"],
        cross_attn_norm=t["cross_attn_norm"], snr_shift=p["snr_shift"], action_snr_shift=p["action_snr_shift"],
        text_dropout_prob=0.0, num_inference_steps=p["num_inference_steps"],
        action_num_inference_steps=p["action_num_inference_steps"], guidance_scale=p["guidance_scale"],
        action_guidance_scale=p["action_guidance_scale"], attention_backend="sdpa", **overrides)
    n = p["action_per_frame"]
    data_config = LingBotVADataConfig(num_latent_frames=frames, action_per_frame=n, action_horizon=frames * n)
    model = LingBotVAModel(model_config, data_config).eval()
    weights = {k: v.float() for k, v in load_file(str(FIXTURE / "model.safetensors")).items()}
    report = load_state_strict(model.transformer, map_keys(weights, "lingbot_va"), source=str(FIXTURE))
    assert report.ok, report.describe()
    return model


@pytest.fixture(scope="module")
def train_model(fixture):
    return _model(fixture[0], frames=fixture[0]["train_latent_frames"])


def test_inference_forward_fp32(train_model, fixture):
    _, inputs, expected = fixture
    text = _pad(inputs["text_emb"])
    with torch.no_grad():
        video = train_model.transformer(inputs["infer.video.noisy_latents"].float(), inputs["infer.video.timesteps"],
                                        inputs["infer.video.grid_id"].float(), text)
        action = train_model.transformer(inputs["infer.action.noisy_latents"], inputs["infer.action.timesteps"],
                                         inputs["infer.action.grid_id"].float(), text, action_mode=True)
    print(f"lingbot_va second golden fp32 forward max|diff| video "
          f"{(video - expected['infer.video_pred']).abs().max().item():.1e}, action "
          f"{(action - expected['infer.action_pred']).abs().max().item():.1e}")
    torch.testing.assert_close(video, expected["infer.video_pred"], atol=INFER_TOL, rtol=INFER_TOL)
    torch.testing.assert_close(action, expected["infer.action_pred"], atol=INFER_TOL, rtol=INFER_TOL)


def test_training_draws_forward_and_loss(train_model, fixture):
    _, inputs, expected = fixture
    seed = int(inputs["draws.torch_manual_seed"])
    gen = torch.Generator().manual_seed(seed)
    video = draw_stream(inputs["draws.video.x0"], train_model.video_schedule, gen, noisy_cond_prob=0.5)
    mask = inputs["train.action.mask"]
    action = draw_stream(inputs["draws.action.x0"], train_model.action_schedule, gen, noisy_cond_prob=0.0,
                         channel_mask=mask)
    chunk, window = draw_mask_params(gen, chunk_size_range=(1, 4), window_size_range=(4, 64))
    assert (chunk, window) == (int(expected["train.chunk_size"]), int(expected["train.window_size"]))
    assert torch.equal(video.noisy, expected["train.video.noisy_latents"])
    assert torch.equal(video.clean, inputs["draws.video.x0"])  # the noisy-conditioning branch is not taken
    assert torch.equal(video.timesteps, expected["train.video.timesteps"])
    assert torch.equal(video.target, expected["train.video.targets"])
    assert torch.equal(action.noisy, expected["train.action.noisy_latents"])
    assert torch.equal(action.target, expected["train.action.targets"])
    text = _pad(inputs["text_emb"])
    with torch.no_grad():
        pred_video, pred_action = train_model.transformer.forward_train(
            noisy_video=video.noisy.float(), clean_video=video.clean.float(), noisy_action=action.noisy.float(),
            clean_action=action.clean.float(), video_timesteps=video.timesteps,
            clean_video_timesteps=video.clean_timesteps, action_timesteps=action.timesteps,
            clean_action_timesteps=action.clean_timesteps, video_grid_ids=expected["train.video.grid_id"].float(),
            action_grid_ids=expected["train.action.grid_id"].float(), text=text, chunk_size=chunk,
            window_size=window)
    diffs = [(pred_video - expected["train.video_pred"].float()).abs().max().item(),
             (pred_action - expected["train.action_pred"].float()).abs().max().item()]
    print(f"lingbot_va second golden training forward (fp32 vs bf16 reference) max|diff| {diffs[0]:.1e} / "
          f"{diffs[1]:.1e}")
    torch.testing.assert_close(pred_video, expected["train.video_pred"].float(), atol=TRAIN_ATOL, rtol=0)
    torch.testing.assert_close(pred_action, expected["train.action_pred"].float(), atol=TRAIN_ATOL, rtol=0)
    batch = {"latents": inputs["draws.video.x0"], "actions": inputs["draws.action.x0"], "actions_mask": mask,
             "text_emb": text}
    train_model.seed_rng(seed)
    with torch.no_grad():
        out = train_model(batch)
    for ours, ref in (("latent_loss", "train.latent_loss"), ("action_loss", "train.action_loss")):
        torch.testing.assert_close(out.metrics[ours], expected[ref], rtol=LOSS_RTOL, atol=0)
    torch.testing.assert_close(out.loss, expected["train.loss"], rtol=LOSS_RTOL, atol=0)


@pytest.mark.parametrize("exec_step", [-1, 2])
def test_first_chunk_sampling_matches_lerobots_infer(fixture, exec_step):
    from embodied_models.lingbot_va.streaming import StreamingSession

    cfg, inputs, expected = fixture
    model = _model(cfg, frames=cfg["policy"]["frame_chunk_size"], video_exec_step=exec_step)
    key = "full" if exec_step == -1 else f"exec{exec_step}"
    reference = expected[f"sample.{key}.actions"]
    used = cfg["policy"]["used_action_channel_ids"]
    want = reference[:, used, 1:].squeeze(-1).flatten(2).transpose(1, 2)  # lerobot's predict_action_chunk
    noise = {"video": inputs["sample.noise.video"], "action": inputs["sample.noise.action"]}
    text, null = _pad(inputs["text_emb"][:1]), inputs["null_text_emb"].float()
    batch = {"latents": inputs["sample.init_latent"], "text_emb": text, "null_text_emb": null}
    with torch.no_grad():
        chunk = model.sample_actions(batch, noise=noise)
    session = StreamingSession(model, text, null_text_emb=null)
    streamed, _ = session.predict(noise=noise, first_latent=inputs["sample.init_latent"])
    print(f"lingbot_va second golden first chunk (video_exec_step={exec_step}) max|diff| sample_actions "
          f"{(chunk - want).abs().max().item():.1e}, streaming {(streamed - want).abs().max().item():.1e}")
    torch.testing.assert_close(chunk, want, atol=INFER_TOL, rtol=INFER_TOL)
    torch.testing.assert_close(streamed, want, atol=INFER_TOL, rtol=INFER_TOL)
    torch.testing.assert_close(session.last_actions, reference, atol=INFER_TOL, rtol=INFER_TOL)
