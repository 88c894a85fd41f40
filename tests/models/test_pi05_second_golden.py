"""pi0.5 against a second golden of lerobot 0.6.1's own PI05Pytorch (tests/fixtures/pi05_gqa_patch7, written by
benchmarks/pi05_second_golden.py in .venv-lerobot): 8 query heads on 2 KV heads in 3 layers, SigLIP at patch 7 with
3 cameras of 16 tokens (two absent ones), 11 language tokens, chunk 6, max_action_dim 12, 4 Euler steps, periods
0.01 / 2.0, B = 3. Tolerance as the shared golden's (1e-5).

lerobot's own config (``lerobot_config.json``) is read through embodied_models.pi05.reference for every field it
states; its variant names stand for the released sizes, which the generator shrank, so the sizes come from
``fixture.json``. The images go in as the uint8 levels the reference saw as ``levels / 255 * 2 - 1``.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from embodied_models.pi05.batch import Pi05PreparedBatch
from embodied_models.pi05.checkpoint import load_pi05_checkpoint
from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig
from embodied_models.pi05.modeling import Pi05Model
from embodied_models.pi05.reference import reference_model_fields
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "pi05_gqa_patch7"
ATOL = 1e-5
META = json.loads((FIXTURE / "fixture.json").read_text())


def _configs(attn: str) -> tuple[Pi05ModelConfig, Pi05DataConfig]:
    fields = reference_model_fields(json.loads((FIXTURE / "lerobot_config.json").read_text()))
    sizes = META["sizes"]
    model = Pi05ModelConfig(**{
        **fields, "vlm_width": sizes["vlm_width"], "vlm_mlp_dim": sizes["vlm_mlp"], "vocab_size": sizes["vocab"],
        "expert_width": sizes["expert_width"], "expert_mlp_dim": sizes["expert_mlp"], "depth": sizes["depth"],
        "num_heads": sizes["heads"], "num_kv_heads": sizes["kv_heads"], "head_dim": sizes["head_dim"],
        "rms_norm_eps": META["rms_norm_eps"], "vision_width": sizes["vision_width"],
        "vision_depth": sizes["vision_depth"], "vision_mlp_dim": sizes["vision_mlp"],
        "vision_num_heads": sizes["vision_heads"], "vision_patch_size": sizes["patch"],
        "layer_norm_eps": META["vision_layer_norm_eps"], "tokenizer": "tiny", "attn_implementation": attn})
    data = Pi05DataConfig(camera_keys=[f"cam{i}" for i in range(META["num_cameras"])],
                          num_image_slots=META["num_cameras"], image_size=(sizes["image"],) * 2,
                          action_dim=META["real_action_dim"], action_horizon=META["chunk_size"])
    return model, data


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: tiny ops on the shared 2-core box only contend with other jobs on two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def golden() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    return ({k: v.clone() for k, v in load_file(FIXTURE / "inputs.safetensors").items()},
            {k: v.clone() for k, v in load_file(FIXTURE / "expected.safetensors").items()})


def _model(attn: str) -> Pi05Model:
    torch.manual_seed(9)  # another init than the reference's: every value must come from the file
    model = Pi05Model(*_configs(attn)).eval()
    report = load_pi05_checkpoint(model, FIXTURE / "model.safetensors")
    assert report.ok
    return model


def _batch(inputs: dict[str, torch.Tensor]) -> Pi05PreparedBatch:
    cams = range(META["num_cameras"])
    return Pi05PreparedBatch(images=torch.stack([inputs[f"image_levels.cam{i}"] for i in cams], dim=1),
                             image_masks=torch.stack([inputs[f"image_mask.cam{i}"] for i in cams], dim=1),
                             tokens=inputs["lang_tokens"], token_mask=inputs["lang_mask"], actions=inputs["actions"])


def _max_diff(a: torch.Tensor, b: torch.Tensor, what: str) -> float:
    assert a.shape == b.shape, (what, a.shape, b.shape)
    diff = (a.float() - b.float()).abs().max().item()
    assert diff <= ATOL, (what, diff)
    return diff


def test_the_config_is_the_references():
    model, _ = _configs("eager")
    assert (model.max_action_dim, model.max_state_dim, model.num_inference_steps) == (12, 16, 4)
    assert (model.min_period, model.max_period, model.max_token_len) == (0.01, 2.0, 11)


def test_embeddings_and_masks_match(golden):
    inputs, expected = golden
    model = _model("eager")
    with torch.no_grad():
        embs, pad, ar = model.embed_prefix(_batch(inputs))
        t = inputs["time"][:, None, None]
        suffix, cond = model.embed_suffix(t * inputs["noise"] + (1 - t) * inputs["actions"], inputs["time"])
    diff = _max_diff(embs, expected["debug.prefix_embs"], "prefix_embs")
    assert torch.equal(pad, expected["debug.prefix_pad_mask"])
    assert torch.equal(ar.long(), expected["debug.prefix_att_mask"])
    _max_diff(suffix, expected["debug.suffix_embs"], "suffix_embs")
    _max_diff(cond, expected["debug.adarms_cond"], "adarms_cond")
    print(f"pi05 second golden: prefix_embs max|diff| {diff:.3g} ({embs.shape[1]} tokens)")


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_loss_and_sampled_actions_match(golden, attn):
    inputs, expected = golden
    model = _model(attn)
    batch = _batch(inputs)
    with torch.no_grad():
        loss = model.loss_elements(batch, noise=inputs["noise"], time=inputs["time"])
        sampled = model.sample_actions(batch, noise=inputs["noise"], num_steps=META["num_inference_steps"])
    loss_diff = _max_diff(loss, expected["loss"], "loss")
    sample_diff = _max_diff(sampled, expected["sampled_actions"], "sampled_actions")
    print(f"pi05 second golden [{attn}]: loss max|diff| {loss_diff:.3g}, sampled actions max|diff| {sample_diff:.3g}")
