"""LingBot-VA model: sizes, forward/backward of the tiny preset, RNG ownership, causality, sampling, streaming."""

from __future__ import annotations

import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_models.lingbot_va.blocks import LingBotBlock
from embodied_models.lingbot_va.checkpoint import num_parameters
from embodied_models.lingbot_va.masks import StreamLayout, dense_stream_mask
from embodied_models.lingbot_va.modeling import LingBotVAModel, build_model
from embodied_models.lingbot_va.rope import action_grid_ids, video_grid_ids
from embodied_models.lingbot_va.streaming import StreamingSession

OFFICIAL_PARAMS = 5.09e9  # LingBot-VA release: Wan2.2 TI2V-5B + action stream


def _configs(name: str):
    config = load_config(training={"model_name": name})
    return config.model, config.data


@pytest.fixture(scope="module")
def tiny() -> LingBotVAModel:
    torch.manual_seed(0)
    return build_model(*_configs("lingbot_va_tiny"))


def _batch(model: LingBotVAModel, batch_size: int = 2, seed: int = 0) -> dict[str, torch.Tensor]:
    cfg, data = model.config, model.data_config
    gen = torch.Generator().manual_seed(seed)
    h, w = data.latent_hw()
    frames, n = data.num_latent_frames, data.action_per_frame
    mask = torch.zeros(batch_size, cfg.action_dim, frames, n, 1)
    mask[:, cfg.used_action_channel_ids] = 1.0
    return {"latents": torch.randn(batch_size, cfg.in_channels, frames, h, w, generator=gen),
            "actions": torch.randn(batch_size, cfg.action_dim, frames, n, 1, generator=gen) * mask,
            "actions_mask": mask.bool(),
            "text_emb": torch.randn(batch_size, cfg.text_len, cfg.text_dim, generator=gen),
            "null_text_emb": torch.randn(batch_size, 1, cfg.text_dim, generator=gen)}


@pytest.mark.parametrize("name", ["lingbot_va_libero", "lingbot_va_robotwin"])
def test_full_size_builds_on_meta_with_official_parameter_count(name):
    model_config, data_config = _configs(name)
    assert not model_config.validate() and not data_config.validate()
    with torch.device("meta"):
        model = LingBotVAModel(model_config, data_config)
    count = num_parameters(model)
    assert abs(count - OFFICIAL_PARAMS) / OFFICIAL_PARAMS < 0.005, count
    assert len(model.transformer.blocks) == 30 and model.transformer.config.num_attention_heads * 128 == 3072
    assert model.fsdp_units() == (LingBotBlock,)
    assert model.video_schedule.sigmas.device.type == "cpu"  # not meta: the schedule is no parameter


def test_tiny_forward_backward_uses_only_its_generator(tiny):
    batch = _batch(tiny)
    global_state = torch.get_rng_state()
    tiny.seed_rng(3)
    out = tiny(batch)
    assert torch.equal(torch.get_rng_state(), global_state), "forward touched the global RNG"
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    assert set(out.metrics) == {"latent_loss", "action_loss"}
    out.loss.backward()
    frozen = {n for n, p in tiny.named_parameters() if not p.requires_grad}
    assert frozen and all(".text_embedder." in n and "condition_embedder_action" in n for n in frozen)
    missing = [n for n, p in tiny.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing
    tiny.zero_grad(set_to_none=True)


def test_generator_state_reproduces_the_step(tiny):
    batch = _batch(tiny)
    tiny.seed_rng(11)
    first = tiny(batch).loss.detach()
    state = tiny.rng_state()
    second = tiny(batch).loss.detach()
    assert not torch.equal(first, second)  # new draws each step
    tiny.set_rng_state(state)
    assert torch.equal(tiny(batch).loss.detach(), second)
    tiny.seed_rng(11)
    assert torch.equal(tiny(batch).loss.detach(), first)


def test_text_dropout_uses_null_embedding(tiny):
    batch = _batch(tiny, batch_size=8)
    tiny.config.text_dropout_prob = 1.0
    try:
        draws = tiny.draw_training_streams(batch)
    finally:
        tiny.config.text_dropout_prob = 0.1
    assert bool(draws["text_dropped"].all())
    assert torch.equal(draws["text"][:, :1], batch["null_text_emb"])
    assert not draws["text"][:, 1:].any()


def test_noisy_tokens_do_not_see_future_frames(tiny):
    """Block causality: changing clean frame 2 leaves every prediction of frames 0-1 unchanged."""
    net = tiny.transformer.eval()
    batch = _batch(tiny, batch_size=1)
    frames, n = tiny.data_config.num_latent_frames, tiny.data_config.action_per_frame
    h, w = tiny.data_config.latent_hw()
    t = torch.full((1, frames), 500.0)
    from embodied_models.lingbot_va.rope import action_grid_ids, video_grid_ids

    def run(clean):
        with torch.no_grad():
            return net.forward_train(
                noisy_video=batch["latents"], clean_video=clean, noisy_action=batch["actions"],
                clean_action=batch["actions"], video_timesteps=t, clean_video_timesteps=t * 0, action_timesteps=t,
                clean_action_timesteps=t * 0, video_grid_ids=video_grid_ids(frames, h // 2, w // 2)[None],
                action_grid_ids=action_grid_ids(frames, n)[None], text=batch["text_emb"], chunk_size=1,
                window_size=64)

    clean = batch["latents"].clone()
    video_a, action_a = run(clean)
    clean[:, :, 2] += 1.0
    video_b, action_b = run(clean)
    # Noisy video of frame f sees clean frames < f only: no noisy video token sees clean frame 2.
    torch.testing.assert_close(video_a, video_b, atol=1e-6, rtol=0)
    # Actions of frames 0-1 do not see clean frame 2; frame 2's actions come after its video and see it.
    torch.testing.assert_close(action_a[:, : 2 * n], action_b[:, : 2 * n], atol=1e-6, rtol=0)
    assert not torch.allclose(action_a[:, 2 * n:], action_b[:, 2 * n:], atol=1e-4)


def test_mask_rules_small_case():
    layout = StreamLayout(num_frames=2, video_tokens_per_frame=1, action_tokens_per_frame=1)
    # tokens: nv0 nv1 cv0 cv1 na0 na1 ca0 ca1 with frame ids 0 2 0 2 1 3 1 3
    mask = dense_stream_mask(layout, chunk_size=1, window_size=10)
    nv1, cv0, cv1, na0, ca0 = 1, 2, 3, 4, 6
    assert mask[nv1, cv0] and not mask[nv1, cv1]  # noisy sees strictly earlier clean
    assert mask[cv1, cv0] and mask[cv1, cv1] and not mask[cv0, nv1 - 1]  # clean causal, never noisy
    assert mask[na0, cv0] and not mask[na0, 0]  # noisy action sees its frame's clean video, not noisy video
    assert mask[ca0, cv0] and not mask[cv0, ca0]
    narrow = dense_stream_mask(layout, chunk_size=1, window_size=1)
    assert not narrow[cv1, cv0] and narrow[cv1, ca0]
    chunked = dense_stream_mask(layout, chunk_size=2, window_size=10)
    assert chunked[0, 1] and chunked[1, 0]  # one chunk: noisy frames see each other


def test_sample_actions_shape_and_determinism(tiny):
    tiny.eval()
    batch = _batch(tiny)
    cfg, data = tiny.config, tiny.data_config
    tiny.seed_rng(5)
    first = tiny.sample_actions(batch, num_steps=2)
    tiny.seed_rng(5)
    again = tiny.sample_actions(batch, num_steps=2)
    assert first.shape == (2, (data.num_latent_frames - 1) * data.action_per_frame, len(cfg.used_action_channel_ids))
    assert torch.equal(first, again) and torch.isfinite(first).all()
    # Guidance (video 5.0 by default) runs prompt and empty prompt as one doubled batch; without the empty
    # prompt there is nothing to guide with and it equals guidance 1.
    tiny.seed_rng(5)
    unguided = tiny.sample_actions({k: v for k, v in batch.items() if k != "null_text_emb"}, num_steps=2)
    tiny.config.guidance_scale = 1.0
    try:
        tiny.seed_rng(5)
        assert torch.equal(tiny.sample_actions(batch, num_steps=2), unguided)
    finally:
        tiny.config.guidance_scale = 5.0
    assert not torch.allclose(first, unguided)
    tiny.train()


@pytest.mark.parametrize(("chunk", "window"), [(1, 64), (2, 3), (3, 1)])
def test_flex_block_mask_equals_dense_mask(chunk, window):
    """The GPU path's BlockMask and the CPU path's dense mask give the same attention (eager flex on CPU)."""
    from torch.nn.attention.flex_attention import flex_attention

    from embodied_models.lingbot_va.masks import flex_stream_mask

    layout = StreamLayout(num_frames=5, video_tokens_per_frame=6, action_tokens_per_frame=4)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, layout.num_tokens, 12, generator=gen) for _ in range(3))
    dense = dense_stream_mask(layout, chunk_size=chunk, window_size=window)
    block = flex_stream_mask(layout, chunk_size=chunk, window_size=window, device="cpu")
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense)
    torch.testing.assert_close(flex_attention(q, k, v, block_mask=block), expected, atol=1e-5, rtol=1e-5)


def test_run_config_checks_name_the_fix():
    from embodied_core.errors import ConfigError
    from embodied_core.validation import validate_run_config

    config = load_config(training={"model_name": "lingbot_va_tiny", "dataset_path": "/data", "num_workers": 0,
                                   "trainer_type": "FinetuneTrainer", "dataset_strategy": "default",
                                   "dtype": "float32"},
                         data={"action_dim": 5})
    with pytest.raises(ConfigError) as err:
        validate_run_config(config, world_size=1)
    message = str(err.value)
    assert "--trainer-type lingbot_va" in message and "--dataset-strategy lingbot_va" in message
    assert "data.action_dim=5" in message


def test_gradient_checkpointing_gives_the_same_gradients(tiny):
    batch = _batch(tiny)
    grads = []
    for checkpointing in (False, True):
        tiny.transformer.gradient_checkpointing = checkpointing
        tiny.seed_rng(9)
        tiny(batch).loss.backward()
        grads.append({n: p.grad.clone() for n, p in tiny.named_parameters() if p.grad is not None})
        tiny.zero_grad(set_to_none=True)
    tiny.transformer.gradient_checkpointing = False
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_rope_is_complex_so_mixed_precision_casts_leave_it_alone():
    """FSDP cast_forward_inputs / autocast cast floating inputs to bf16; RoPE rotations must keep fp32 precision."""
    from embodied_models.lingbot_va.rope import GridRope, action_grid_ids, apply_rope

    rope = GridRope(12)(action_grid_ids(600, 4)[None])
    assert rope.dtype == torch.complex64 and not torch.is_floating_point(rope)
    x = torch.randn(1, rope.shape[1], 2, 12)
    rotated = apply_rope(x, rope)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))  # a rotation keeps norms


# ---------------------------------------------------------------- streaming (KV cache) vs cache-free
def _noise(model: LingBotVAModel, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    h, w = model.data_config.latent_hw()
    frames, n = model.data_config.num_latent_frames, model.data_config.action_per_frame
    return {"video": torch.randn(2, model.config.in_channels, frames, h, w, generator=gen),
            "action": torch.randn(2, model.config.action_dim, frames, n, 1, generator=gen)}


@pytest.mark.parametrize("guided", [False, True])
def test_first_chunk_equals_cache_free_sampling(tiny, guided):
    batch = _batch(tiny)
    if not guided:
        batch.pop("null_text_emb")
    noise = _noise(tiny, 1)
    expected = tiny.sample_actions(batch, noise={k: v.clone() for k, v in noise.items()}, num_steps=3)
    session = StreamingSession(tiny, batch["text_emb"], null_text_emb=batch.get("null_text_emb"), num_steps=3)
    actions, _ = session.predict(noise=noise, first_latent=batch["latents"][:, :, :1])
    torch.testing.assert_close(actions, expected, atol=1e-5, rtol=1e-5)
    assert session.segments() == [(0, True), (0, True)]  # predicted video, predicted actions


def test_feedback_replaces_predictions_and_next_chunk_sees_it(tiny):
    """After observe(), a forward of the next chunk through the cache equals one joint forward without cache."""
    batch = _batch(tiny)
    batch.pop("null_text_emb")
    net, frames, n = tiny.transformer, tiny.data_config.num_latent_frames, tiny.data_config.action_per_frame
    session = StreamingSession(tiny, batch["text_emb"], num_steps=2)
    session.predict(noise=_noise(tiny, 2), first_latent=batch["latents"][:, :, :1])
    observed, executed = batch["latents"][:, :, 1:], batch["actions"]
    session.observe(observed, executed)
    assert session.segments() == [(0, False), (0, False)] and session.frame_offset == frames
    noisy = torch.randn_like(batch["latents"])
    t = torch.full((2, frames), 700.0)
    with torch.no_grad():
        cached = session._forward(noisy, t, action=False, write=None, scale=1.0)
        # The same context without a cache: [observed video | executed actions | noisy chunk] in one sequence.
        h, w = batch["latents"].shape[3] // 2, batch["latents"].shape[4] // 2
        video = torch.cat([batch["latents"][:, :, :1], observed], dim=2)
        v_grid = video_grid_ids(frames, h, w).expand(2, -1, -1)
        a_grid = action_grid_ids(frames, n).expand(2, -1, -1)
        new_grid = video_grid_ids(frames, h, w, frame_offset=frames).expand(2, -1, -1)
        lv, la = v_grid.shape[-1], a_grid.shape[-1]
        zeros = torch.zeros(2, frames)
        temb0, proj0 = net.embed_time(zeros, h * w, action=False, dtype=torch.float32)
        temba, proja = net.embed_time(zeros, n, action=True, dtype=torch.float32)
        temb1, proj1 = net.embed_time(t, h * w, action=False, dtype=torch.float32)
        tokens = torch.cat([net.embed_video(video), net.embed_action(executed), net.embed_video(noisy)], dim=1)
        length = tokens.shape[1]
        mask = torch.zeros(length, length, dtype=torch.bool)
        mask[:lv, :lv] = True  # observed video was written first: it saw only itself
        mask[lv:lv + la, :lv + la] = True  # executed actions saw the video and themselves
        mask[lv + la:] = True  # the new chunk sees everything cached and itself
        out = net.trunk(tokens, batch["text_emb"], torch.cat([temb0, temba, temb1], dim=1),
                        torch.cat([proj0, proja, proj1], dim=1), torch.cat([v_grid, a_grid, new_grid], dim=2), mask)
        expected = net.video_pred_to_grid(net.video_head(out[:, lv + la:]), frames, *batch["latents"].shape[3:])
    torch.testing.assert_close(cached, expected, atol=1e-5, rtol=1e-5)


def test_old_chunks_are_evicted(tiny):
    batch = _batch(tiny)
    session = StreamingSession(tiny, batch["text_emb"], max_chunks=2, num_steps=1)
    session.predict(first_latent=batch["latents"][:, :, :1])
    for _ in range(3):
        session.observe(batch["latents"][:, :, 1:] if session.frame_offset == 0 else batch["latents"])
        actions, _ = session.predict()
        assert torch.isfinite(actions).all()
    assert {chunk for chunk, _ in session.segments()} == {2, 3}
    assert actions.shape == (2, tiny.data_config.num_latent_frames * tiny.data_config.action_per_frame, 4)
    with pytest.raises(ValueError, match="first_latent"):
        StreamingSession(tiny, batch["text_emb"]).predict()
