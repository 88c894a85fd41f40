"""SmolVLA against a second golden of lerobot 0.6.1's own VLAFlowMatching (tests/fixtures/smolvla_prefix_length,
written by benchmarks/smolvla_second_golden.py in .venv-lerobot): ``prefix_length`` 72 over a 66-token prefix
(issue 26, known instance 5), image special tokens, 3 cameras at patch 4, 6 VLM layers with 3 expert layers and
joint attention every 4th layer, chunk 7, 3 Euler steps. Tolerance as the shared golden's (atol 2e-5, rtol 1e-5).

The model/data config comes from the fixture's lerobot ``config.json`` and VLM config through the importer's
translation (``lerobot_configs``). With ``model.prefix_length`` the prefix outputs and the KV cache have lerobot's
shapes; without it the values are the same (the padding is masked).
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from embodied_models.smolvla.batch import SmolVLAPreparedBatch
from embodied_models.smolvla.checkpoint import load_smolvla_checkpoint
from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig
from embodied_models.smolvla.lerobot_import import lerobot_configs
from embodied_models.smolvla.modeling import SmolVLAModel
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "smolvla_prefix_length"
ATOL, RTOL = 2e-5, 1e-5
META = json.loads((FIXTURE / "fixture.json").read_text())


def fixture_configs(**model: object) -> tuple[SmolVLAModelConfig, SmolVLADataConfig]:
    """Our sections for the fixture, through the importer's reading of lerobot's config.json."""
    model_dict, data_dict = lerobot_configs(json.loads((FIXTURE / "config.json").read_text()),
                                            json.loads((FIXTURE / "vlm_config.json").read_text()),
                                            model_defaults={}, data_defaults={}, source=FIXTURE / "config.json")
    model_cfg = SmolVLAModelConfig(**{**model_dict, **META["special_tokens"], **model})
    return model_cfg, SmolVLADataConfig(**{**data_dict, "image_size": tuple(data_dict["image_size"])})


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def golden() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    return ({k: v.clone() for k, v in load_file(FIXTURE / "inputs.safetensors").items()},
            {k: v.clone() for k, v in load_file(FIXTURE / "expected.safetensors").items()})


def _model(attn: str = "eager", **model: object) -> SmolVLAModel:
    torch.manual_seed(7)  # another init than the reference's: every value must come from the file
    net = SmolVLAModel(*fixture_configs(attn_implementation=attn, **model)).eval()
    # the folder's config.json (prefix_length 72) refuses another prefix_length; as a state dict it is not read
    source = FIXTURE / "model.safetensors"
    report = load_smolvla_checkpoint(net, source if "prefix_length" not in model else load_file(source))
    assert report.ok and not report.ignored and not report.missing
    return net


def _batch(inputs: dict[str, torch.Tensor]) -> SmolVLAPreparedBatch:
    cams = range(META["num_cameras"])
    return SmolVLAPreparedBatch(
        images=tuple(inputs[f"image_levels.cam{i}"].float() / 255.0 * 2.0 - 1.0 for i in cams),
        image_masks=torch.stack([inputs[f"image_mask.cam{i}"] for i in cams], dim=1),
        tokens=inputs["lang_tokens"], token_mask=inputs["lang_mask"], state=inputs["state"],
        actions=inputs["actions"], action_is_pad=None)


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> float:
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    torch.testing.assert_close(actual.float(), expected.float(), atol=ATOL, rtol=RTOL, msg=what)
    return (actual.float() - expected.float()).abs().max().item()


def test_the_config_reads_prefix_length():
    model, data = fixture_configs()
    assert model.prefix_length == META["prefix_length"] == 72
    assert (model.num_vlm_layers, model.num_expert_layers, model.self_attn_every_n_layers) == (6, 3, 4)
    assert model.add_image_special_tokens and data.image_size == (32, 32) and len(data.camera_keys) == 3


def test_prefix_outputs_and_kv_cache_have_lerobots_shapes(golden):
    inputs, expected = golden
    model = _model()
    batch = _batch(inputs)
    shapes = META["shapes"]
    with torch.no_grad():
        embs, pad, flags = model.embed_prefix(batch)
        prefix_out = model.prefix_features(batch)
        cache, cache_pad = model.fill_prefix_cache(batch)
    assert list(embs.shape) == shapes["prefix_embs"] == [3, 72, 24]
    assert list(prefix_out.shape) == shapes["prefix_out"]
    assert torch.equal(pad, expected["debug.prefix_pad_mask"]) and torch.equal(cache_pad, pad)
    assert torch.equal(flags.bool(), expected["debug.prefix_att_mask"])
    # lerobot caches every kept layer; ours stops at the last layer an expert reads (layer 4 of 6)
    assert len(cache) == model.last_expert_layer + 1 == 5
    assert [[list(kv.key.shape), list(kv.value.shape)] for kv in cache] == shapes["cache"][:len(cache)]
    diff = _close(prefix_out[pad], expected["debug.prefix_out"][pad], "prefix_out (valid tokens)")
    _close(cache[2].key, expected["debug.cache.layer2.key"], "layer 2 keys")
    print(f"smolvla second golden: prefix_out max|diff| {diff:.3g}, prefix {embs.shape[1]} tokens")
    unpadded = SmolVLAModel(*fixture_configs(prefix_length=-1)).embed_prefix(batch)[0]
    assert list(unpadded.shape) == shapes["unpadded.prefix_embs"] == [3, 66, 24]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("prefix_length", [72, -1])
def test_loss_and_sampled_actions_match(golden, attn, prefix_length):
    """Padded to lerobot's prefix_length or not, the values are the reference's (padded run)."""
    inputs, expected = golden
    model = _model(attn, prefix_length=prefix_length)
    batch = _batch(inputs)
    with torch.no_grad():
        loss = model.loss_elements(batch, noise=inputs["noise"], time=inputs["time"])
        sampled = model.sample_actions(batch, noise=inputs["noise"])
    loss_diff = _close(loss, expected["loss"], "loss")
    sample_diff = _close(sampled, expected["sampled_actions"], "sampled_actions")
    _close(loss, expected["unpadded.loss"], "loss vs lerobot without prefix_length")
    _close(sampled, expected["unpadded.sampled_actions"], "sampled vs lerobot without prefix_length")
    print(f"smolvla second golden [{attn}, prefix_length {prefix_length}]: loss max|diff| {loss_diff:.3g}, "
          f"sampled actions max|diff| {sample_diff:.3g}")
