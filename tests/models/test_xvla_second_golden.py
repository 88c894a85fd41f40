"""X-VLA against a second golden of lerobot 0.6.1's own XVLAModel (tests/fixtures/xvla_scaled_text, written by
benchmarks/xvla_second_golden.py in .venv-lerobot): BART ``scale_embedding: true``, the remote-code vision config,
3 DaViT stages at 36 x 28 with window padding, 3 views (view 0 absent in one element), per-domain projections,
the ``joint`` and ``auto`` spaces. Tolerance as the shared golden's (atol 2e-5, rtol 1e-5).

The model config is read from the fixture's lerobot ``config.json`` (embodied_models.xvla.reference), and the
weights load from the file beside it, so the config check of the loader runs too. Before issue 26's fix the port
built BART with ``scale_embedding=False`` whatever the checkpoint said: the two tests at the end show that such a
model is refused by the checkpoint's config.json, and that it would have missed the reference by far.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError
from embodied_models.xvla.batch import XvlaPreparedBatch
from embodied_models.xvla.checks import check_run_config
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig
from embodied_models.xvla.modeling import XvlaModel
from embodied_models.xvla.reference import reference_model_fields
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "xvla_scaled_text"
ATOL, RTOL = 2e-5, 1e-5
META = json.loads((FIXTURE / "fixture.json").read_text())
SPACES = [(s["name"], s["action_mode"], s.get("real_dim", 14)) for s in META["action_spaces"]]


def _configs(mode: str, real_dim: int, **model_overrides) -> tuple[XvlaModelConfig, XvlaDataConfig]:
    fields = reference_model_fields(json.loads((FIXTURE / "config.json").read_text()), source="config.json")
    model = XvlaModelConfig(**{**fields, "action_mode": mode, **model_overrides})
    data = XvlaDataConfig(camera_keys=[f"cam{i}" for i in range(META["num_views"])],
                          image_size=tuple(META["image_hw"]), action_horizon=5, action_dim=real_dim,
                          state_dim=META["real_state_dim"])
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
    inputs = {k: v.clone() for k, v in load_file(FIXTURE / "inputs.safetensors").items()}
    return inputs, load_file(FIXTURE / "expected.safetensors")


@pytest.fixture(scope="module")
def models() -> dict[str, XvlaModel]:
    out = {}
    for name, mode, real in SPACES:
        torch.manual_seed(5)  # an init unlike the reference's: every value must come from the file
        model = XvlaModel(*_configs(mode, real)).eval()
        report = model.load_pretrained_checkpoint(FIXTURE / "model.safetensors")
        assert report.ok and len(report.tied) == 1 and len(report.loaded) + 1 == len(model.state_dict())
        out[name] = model
    return out


def _batch(inputs: dict[str, torch.Tensor], name: str) -> XvlaPreparedBatch:
    return XvlaPreparedBatch(images=inputs["image_levels"].float() / 255.0, image_masks=inputs["image_mask"],
                             tokens=inputs["input_ids"], domain_id=inputs["domain_id"], state=inputs["proprio"],
                             actions=inputs[f"{name}.action"])


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> float:
    assert got.shape == want.shape, (what, got.shape, want.shape)
    torch.testing.assert_close(got.float(), want.float(), atol=ATOL, rtol=RTOL, msg=what)
    return (got.float() - want.float()).abs().max().item()


def test_the_config_is_the_references(models):
    model = models["joint"]
    assert model.config.text_scale_embedding is True and model.config.use_hetero_proj is True
    assert model.config.vision_embed_dim == [8, 12, 16] and model.config.vision_max_position_embeddings == 6
    assert model.vlm.language_model.shared.embed_scale == pytest.approx(24 ** 0.5)


def test_encoder_matches(golden, models):
    inputs, expected = golden
    model = models["joint"]
    batch = _batch(inputs, "joint")
    present = inputs["image_mask"].reshape(-1)
    with torch.no_grad():
        pixels = model.pixel_values(batch).flatten(0, 1)[present]
        _close(model.vlm.vision_tower(pixels).last_hidden_state, expected["debug.vlm.vision_last_hidden"], "vision")
        _close(model.vlm.image_tokens(pixels), expected["debug.vlm.projector_out"], "projector")
        _close(model.vlm.text_embeddings(inputs["input_ids"]), expected["debug.vlm.text_embeds"], "text embeds")
        diff = _close(model.encode(batch)[0], expected["debug.vlm.encoder_out"], "encoder")
    print(f"xvla second golden: encoder_out max|diff| {diff:.3g}")


@pytest.mark.parametrize(("name", "mode", "real_dim"), SPACES)
def test_training_and_sampling_match(golden, models, name, mode, real_dim):
    inputs, expected = golden
    model = models[name]
    batch = _batch(inputs, name)
    with torch.no_grad():
        losses, pred = model.training_outputs(batch, noise=inputs["train.noise"], t_uniform=inputs["train.t_uniform"])
        sampled = model.sample_actions(batch, noise=inputs["sample.init_noise"], num_steps=META["sampling_steps"])
    prefix = f"{name}.train"
    assert sorted(losses) == sorted(k.removeprefix(f"{prefix}.loss.") for k in expected
                                    if k.startswith(f"{prefix}.loss."))
    worst = {"pred": _close(pred, expected[f"{prefix}.pred_action"], f"{name} pred")}
    for term, value in losses.items():
        worst[term] = _close(value, expected[f"{prefix}.loss.{term}"], f"{name} {term}")
    worst["total"] = _close(sum(losses.values()), expected[f"{prefix}.loss_total"], f"{name} total")
    want = expected[f"{name}.sample.action"]
    worst["sample"] = _close(sampled[..., :want.shape[-1]], want, f"{name} sample")
    print(f"xvla second golden [{name}] max|diff|: " + ", ".join(f"{k} {v:.3g}" for k, v in worst.items()))


def test_a_model_without_the_embedding_scale_is_refused_by_the_checkpoint_config():
    """What the port did before: BART's scale_embedding fixed to False. The checkpoint's config.json refuses it."""
    model = XvlaModel(*_configs("joint", 14, text_scale_embedding=False))
    with pytest.raises(ConfigError, match=r"model\.text_scale_embedding=True \(checkpoint\) vs False \(model\)"):
        model.load_pretrained_checkpoint(FIXTURE / "model.safetensors")
    run = load_config("xvla_tiny", training={"pretrained_checkpoint": str(FIXTURE / "model.safetensors")})
    problems = check_run_config(run)  # the same check before anything is built
    assert any("model.text_scale_embedding=True (checkpoint) vs False (model)" in p for p in problems), problems


def test_without_the_scale_the_encoder_misses_the_reference(golden):
    inputs, expected = golden
    model = XvlaModel(*_configs("joint", 14, text_scale_embedding=False)).eval()
    model.load_pretrained_checkpoint(load_file(FIXTURE / "model.safetensors"))  # a state dict: no config check
    with torch.no_grad():
        got = model.encode(_batch(inputs, "joint"))[0]
    assert (got - expected["debug.vlm.encoder_out"]).abs().max() > 1000 * ATOL
