"""SmolVLA against lerobot 0.6.1's own VLAFlowMatching outputs (../shared/fixtures/smolvla_lerobot, see its README).

The fixture's weights go through our checkpoint path (lerobot key layout -> our names, strict report); the
per-element training loss for the given noise/time, lerobot's policy reductions and the 4-step sampled actions must
match within the README's float32 tolerance (atol 2e-5, rtol 1e-5). The debug.* intermediates localise a mismatch
(vision encoder, connector, prefix/suffix embeddings, masks, positions, both towers' outputs, per-step velocities).
Regenerate the fixture with lerobot as its README describes; do not edit the numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from embodied_models.smolvla.attention import block_mask, position_ids
from embodied_models.smolvla.batch import SmolVLAPreparedBatch
from embodied_models.smolvla.checkpoint import load_smolvla_checkpoint
from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig
from embodied_models.smolvla.modeling import SmolVLAModel
from tests.support import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "smolvla_lerobot"
ATOL, RTOL = 2e-5, 1e-5
"""The fixture README's suggested check for a float32 implementation."""


def fixture_configs(fixture: Path = FIXTURE, attn: str = "eager", **model: object
                    ) -> tuple[SmolVLAModelConfig, SmolVLADataConfig]:
    """Our model/data sections for the fixture's tiny lerobot config."""
    cfg = json.loads((fixture / "config.json").read_text())
    vision, text, smol = cfg["vlm_config"]["vision_config"], cfg["vlm_config"]["text_config"], cfg["smolvla_config"]
    model_cfg = SmolVLAModelConfig(**{
        "vlm_width": text["hidden_size"], "vlm_mlp_dim": text["intermediate_size"], "vocab_size": text["vocab_size"],
        "num_vlm_layers": smol["num_vlm_layers"], "num_heads": text["num_attention_heads"],
        "num_kv_heads": text["num_key_value_heads"], "head_dim": text["head_dim"], "rms_norm_eps": text["rms_norm_eps"],
        "pad_token_id": text["pad_token_id"], "expert_width_multiplier": smol["expert_width_multiplier"],
        "num_expert_layers": smol["num_expert_layers"], "attention_mode": smol["attention_mode"],
        "self_attn_every_n_layers": smol["self_attn_every_n_layers"], "vision_width": vision["hidden_size"],
        "vision_depth": vision["num_hidden_layers"], "vision_mlp_dim": vision["intermediate_size"],
        "vision_num_heads": vision["num_attention_heads"], "vision_patch_size": vision["patch_size"],
        "layer_norm_eps": vision["layer_norm_eps"], "scale_factor": cfg["vlm_config"]["scale_factor"],
        "add_image_special_tokens": smol["add_image_special_tokens"],
        "fake_image_token_id": cfg["special_tokens"]["fake_image_token_id"],
        "global_image_token_id": cfg["special_tokens"]["global_image_token_id"],
        "max_state_dim": smol["max_state_dim"], "max_action_dim": smol["max_action_dim"],
        "num_inference_steps": smol["num_steps"], "min_period": smol["min_period"], "max_period": smol["max_period"],
        "attn_implementation": attn, **model})
    data_cfg = SmolVLADataConfig(camera_keys=[f"cam{i}" for i in range(cfg["num_cameras"])],
                                 image_size=tuple(cfg["image_chw"][1:]), state_dim=cfg["real_state_dim"],
                                 action_dim=cfg["real_action_dim"], action_horizon=smol["chunk_size"])
    return model_cfg, data_cfg


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: on the shared 2-core box two threads contend with other jobs (a tiny forward then
    takes ~1 s instead of ~40 ms)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def fixture_data() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    assert FIXTURE.is_dir(), f"{FIXTURE} missing; set SHARED_DATA_DIR to the shared folder"
    # clones: safetensors may hand out tensors that are not 64-byte aligned (1-ulp matmul differences, see README)
    return ({k: v.clone() for k, v in load_file(FIXTURE / "inputs.safetensors").items()},
            {k: v.clone() for k, v in load_file(FIXTURE / "expected.safetensors").items()})


def fixture_batch(inputs: dict[str, torch.Tensor]) -> SmolVLAPreparedBatch:
    """The fixture's inputs as our batch (images already in [-1, 1] at model resolution)."""
    cams = sorted(k.removeprefix("image.") for k in inputs if k.startswith("image."))
    return SmolVLAPreparedBatch(
        images=tuple(inputs[f"image.{c}"] for c in cams),
        image_masks=torch.stack([inputs[f"image_mask.{c}"] for c in cams], dim=1),
        tokens=inputs["lang_tokens"], token_mask=inputs["lang_mask"], state=inputs["state"],
        actions=inputs["actions"], action_is_pad=inputs["action_is_pad"],
    )


def fixture_model(attn: str = "eager") -> SmolVLAModel:
    """A model with the fixture's weights loaded strictly through the lerobot key map."""
    model_cfg, data_cfg = fixture_configs(attn=attn)
    torch.manual_seed(123)  # another init than the reference's: every value must come from the file
    model = SmolVLAModel(model_cfg, data_cfg).eval()
    report = load_smolvla_checkpoint(model, FIXTURE / "model.safetensors")
    assert report.ok and not report.ignored and not report.missing
    return model


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> float:
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    torch.testing.assert_close(actual.float(), expected.float(), atol=ATOL, rtol=RTOL, msg=what)
    return (actual.float() - expected.float()).abs().max().item()


def test_intermediates_match(fixture_data):
    inputs, expected = fixture_data
    model = fixture_model()
    batch = fixture_batch(inputs)
    with torch.no_grad():
        for i in range(2):
            image = inputs[f"image.cam{i}"]
            hidden = model.vision_model(pixel_values=image).last_hidden_state
            _close(hidden, expected[f"debug.vision_last_hidden.cam{i}"], f"vision cam{i}")
            _close(model.connector(hidden), expected[f"debug.image_embeddings.cam{i}"], f"connector cam{i}")
        embs, pad, flags = model.embed_prefix(batch)
        _close(embs, expected["debug.prefix_embs"], "prefix_embs")
        x_t = expected["debug.x_t"]
        _close(model.embed_suffix(x_t, inputs["time"]), expected["debug.suffix_embs"], "suffix_embs")
        # valid tokens only: a padded token's query row is fully masked, so in lerobot's joint training forward it
        # averages every key, actions included (garbage no valid token reads; the prefix-only run differs there)
        _close(model.prefix_features(batch)[pad], expected["debug.prefix_out"][pad], "prefix_out (valid tokens)")
        v_t = model.velocity((embs, pad, flags), x_t, inputs["time"])
        _close(v_t, expected["debug.v_t"], "v_t")
    horizon = x_t.shape[1]
    full_pad = torch.cat([pad, torch.ones(pad.shape[0], horizon, dtype=torch.bool)], dim=1)
    full_flags = torch.cat([flags, torch.ones(pad.shape[0], horizon, dtype=torch.long)], dim=1)
    assert torch.equal(full_pad, expected["debug.pad_mask"])
    assert torch.equal(block_mask(full_pad, full_flags), expected["debug.attention_mask_2d"])
    assert torch.equal(position_ids(full_pad), expected["debug.position_ids"])
    # sampling: suffix positions continue after the valid prefix; the suffix sees the valid prefix and earlier actions
    prefix_len = pad.shape[1]
    suffix_pos = pad.sum(dim=1, keepdim=True) + torch.arange(horizon)[None]
    assert torch.equal(suffix_pos, expected["debug.sample.suffix_position_ids"])
    assert torch.equal(block_mask(full_pad, full_flags)[:, prefix_len:], expected["debug.sample.suffix_attention_mask"])


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_loss_and_sampled_actions_match(fixture_data, attn):
    inputs, expected = fixture_data
    model = fixture_model(attn)
    batch = fixture_batch(inputs)
    with torch.no_grad():
        loss = model.loss_elements(batch, noise=inputs["noise"], time=inputs["time"])
        cache, prefix_pad = model.fill_prefix_cache(batch)
        x, dt, velocities = inputs["noise"], -1.0 / 4, []
        for step in range(4):
            v = model.cached_velocity(cache, prefix_pad, x, torch.full((2,), 1.0 + step * dt))
            velocities.append(v)
            x = x + dt * v
        sampled = model.sample_actions(batch, noise=inputs["noise"])
    loss_diff = _close(loss, expected["loss"], "loss")
    _close(torch.stack(velocities, dim=1), expected["debug.sample.v_t"], "sample v_t")
    sample_diff = _close(sampled, expected["sampled_actions"], "sampled_actions")
    torch.testing.assert_close(sampled, x, atol=0, rtol=0)
    print(f"smolvla golden [{attn}]: loss max|diff| {loss_diff:.3g} (values up to {expected['loss'].max():.3g}), "
          f"sampled actions max|diff| {sample_diff:.3g}")
    # lerobot's policy reductions (real dims, padded steps zeroed, sum / (valid steps x dims))
    with torch.no_grad():
        reduced = model.reduce_loss(loss, batch.action_is_pad)
        per_sample = [model.reduce_loss(loss[i:i + 1], batch.action_is_pad[i:i + 1]) for i in range(2)]
    _close(reduced, expected["loss_policy_mean"], "loss_policy_mean")
    _close(torch.stack(per_sample), expected["loss_policy_per_sample"], "loss_policy_per_sample")


def test_forward_is_the_policy_mean(fixture_data, monkeypatch):
    inputs, expected = fixture_data
    model = fixture_model()
    monkeypatch.setattr(model, "sample_noise_and_time", lambda actions: (inputs["noise"], inputs["time"]))
    with torch.no_grad():
        out = model(fixture_batch(inputs))
    _close(out.loss, expected["loss_policy_mean"], "forward loss")


def test_silent_conventions_matter(fixture_data, monkeypatch):
    """Two of the README's traps move v_t far beyond the tolerance, so the matching tests above can fail."""
    inputs, expected = fixture_data

    def velocity(model: SmolVLAModel) -> torch.Tensor:
        load_smolvla_checkpoint(model.eval(), FIXTURE / "model.safetensors")
        with torch.no_grad():
            return model.velocity(model.embed_prefix(fixture_batch(inputs)), expected["debug.x_t"], inputs["time"])

    # the config's rope_theta (SmolVLM2: 100000) instead of lerobot's hard-coded 10000
    assert (velocity(SmolVLAModel(*fixture_configs(rope_theta=100000.0))) - expected["debug.v_t"]).abs().max() > 0.1
    # pi0's bidirectional suffix (only the first action opens a block) instead of causal actions
    from embodied_models.smolvla import modeling

    horizon = expected["debug.x_t"].shape[1]

    def pi0_blocks(pad: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
        flags = flags.clone()
        flags[:, -horizon + 1:] = 0
        return block_mask(pad, flags)

    monkeypatch.setattr(modeling, "block_mask", pi0_blocks)
    assert (velocity(SmolVLAModel(*fixture_configs())) - expected["debug.v_t"]).abs().max() > 0.1
