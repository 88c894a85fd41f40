"""pi0.5 against lerobot 0.6.1's own PI05Pytorch outputs (../shared/fixtures/pi05_lerobot, see its README).

The fixture's weights go through our checkpoint path (lerobot key layout -> our names, strict report); the
per-element training loss for the given noise/time and the 10-step sampled actions must match within
1e-5. The debug.* intermediates localise a mismatch (embeddings, time conditioning, masks, positions).
Regenerate the fixture with lerobot's PI05Pytorch as its README describes; do not edit the numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from embodied_models.pi05.attention import block_mask, position_ids
from embodied_models.pi05.batch import Pi05PreparedBatch
from embodied_models.pi05.checkpoint import load_pi05_checkpoint
from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig
from embodied_models.pi05.modeling import Pi05Model, time_sincos
from tests.support import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "pi05_lerobot"
ATOL = 1e-5
"""The fixture README's suggested float32 tolerance; eager attention lands ~1e-6 away, SDPA ~2e-6."""


def _configs(fixture: Path, attn: str) -> tuple[Pi05ModelConfig, Pi05DataConfig]:
    cfg = json.loads((fixture / "config.json").read_text())
    vlm, expert, vision = cfg["vlm"], cfg["action_expert"], cfg["vision"]
    model = Pi05ModelConfig(
        vlm_width=vlm["width"], vlm_mlp_dim=vlm["mlp_dim"], vocab_size=vlm["vocab_size"],
        expert_width=expert["width"], expert_mlp_dim=expert["mlp_dim"], depth=vlm["depth"],
        num_heads=vlm["num_heads"], num_kv_heads=vlm["num_kv_heads"], head_dim=vlm["head_dim"],
        rms_norm_eps=vlm["rms_norm_eps"], rope_theta=vlm["rope_theta"],
        vision_width=vision["hidden_size"], vision_depth=vision["num_hidden_layers"],
        vision_mlp_dim=vision["intermediate_size"], vision_num_heads=vision["num_attention_heads"],
        vision_patch_size=vision["patch_size"], layer_norm_eps=vision["layer_norm_eps"],
        max_action_dim=cfg["max_action_dim"], max_state_dim=cfg["max_state_dim"],
        num_inference_steps=cfg["num_inference_steps"], min_period=cfg["min_period"], max_period=cfg["max_period"],
        attn_implementation=attn,
    )
    data = Pi05DataConfig(camera_keys=[f"cam{i}" for i in range(cfg["num_cameras"])],
                          num_image_slots=cfg["num_cameras"], image_size=(vision["image_size"],) * 2,
                          action_dim=cfg["real_action_dim"], action_horizon=cfg["chunk_size"])
    return model, data


@pytest.fixture(scope="module")
def fixture_data() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    assert FIXTURE.is_dir(), f"{FIXTURE} missing; set SHARED_DATA_DIR to the shared folder"
    return load_file(FIXTURE / "inputs.safetensors"), load_file(FIXTURE / "expected.safetensors")


def _batch(inputs: dict[str, torch.Tensor]) -> Pi05PreparedBatch:
    cams = sorted(k.removeprefix("image.") for k in inputs if k.startswith("image."))
    return Pi05PreparedBatch(
        images=torch.stack([inputs[f"image.{c}"] for c in cams], dim=1),
        image_masks=torch.stack([inputs[f"image_mask.{c}"] for c in cams], dim=1),
        tokens=inputs["lang_tokens"], token_mask=inputs["lang_mask"], actions=inputs["actions"],
    )


def _model(attn: str) -> Pi05Model:
    model_cfg, data_cfg = _configs(FIXTURE, attn)
    torch.manual_seed(123)  # a different init than the reference: every value must come from the file
    model = Pi05Model(model_cfg, data_cfg).eval()
    report = load_pi05_checkpoint(model, FIXTURE / "model.safetensors")
    assert report.ok
    assert sorted(report.ignored) == ["paligemma_with_expert.gemma_expert.lm_head.weight",
                                      "paligemma_with_expert.paligemma.lm_head.weight"]
    return model


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return (a.float() - b.float()).abs().max().item()


def test_intermediates_match(fixture_data):
    inputs, expected = fixture_data
    model = _model("eager")
    batch = _batch(inputs)
    with torch.no_grad():
        embs, pad, ar = model.embed_prefix(batch)
        img = model.embed_images(batch.images)
        assert _max_diff(img[:, 0], expected["debug.image_embeddings.cam0"]) <= ATOL
        assert _max_diff(img[:, 1], expected["debug.image_embeddings.cam1"]) <= ATOL
        assert _max_diff(embs[:, -inputs["lang_tokens"].shape[1]:], expected["debug.lang_embeddings"]) <= ATOL
        sincos = time_sincos(inputs["time"], model.config.expert_width, min_period=model.config.min_period,
                             max_period=model.config.max_period)
        assert _max_diff(sincos, expected["debug.time_sincos"]) <= ATOL
        _, cond = model.embed_suffix(expected["debug.x_t"], inputs["time"])
        assert _max_diff(cond, expected["debug.adarms_cond"]) <= ATOL
    horizon = expected["debug.u_t"].shape[1]
    full_pad = torch.cat([pad, torch.ones(pad.shape[0], horizon, dtype=torch.bool)], dim=1)
    full_ar = torch.cat([ar, torch.nn.functional.one_hot(torch.zeros(pad.shape[0], dtype=torch.long), horizon)], dim=1)
    assert torch.equal(full_pad, expected["debug.pad_mask"])
    assert torch.equal(full_ar, expected["debug.ar_mask"])
    assert torch.equal(block_mask(full_pad, full_ar), expected["debug.attention_mask_2d"])
    assert torch.equal(position_ids(full_pad), expected["debug.position_ids"])


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_loss_and_sampled_actions_match(fixture_data, attn):
    inputs, expected = fixture_data
    model = _model(attn)
    batch = _batch(inputs)
    with torch.no_grad():
        loss = model.loss_elements(batch, noise=inputs["noise"], time=inputs["time"])
        sampled = model.sample_actions(batch, noise=inputs["noise"], num_steps=10)
    loss_diff, sample_diff = _max_diff(loss, expected["loss"]), _max_diff(sampled, expected["sampled_actions"])
    print(f"pi05 golden [{attn}]: loss max|diff| {loss_diff:.3g}, sampled actions max|diff| {sample_diff:.3g}")
    assert loss_diff <= ATOL
    assert sample_diff <= ATOL
    # the model's own reduction is lerobot's: mean over the real action dims
    with torch.no_grad():
        real = loss[..., : model.real_action_dim].mean()
    assert abs(real.item() - expected["loss_mean_real_dims"].item()) <= ATOL


def test_forward_reduces_over_real_dims(fixture_data, monkeypatch):
    inputs, expected = fixture_data
    model = _model("eager")
    monkeypatch.setattr(model, "sample_noise_and_time", lambda actions: (inputs["noise"], inputs["time"]))
    with torch.no_grad():
        out = model(_batch(inputs))
    assert abs(out.loss.item() - expected["loss_mean_real_dims"].item()) <= ATOL
