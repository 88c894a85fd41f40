"""``benchmarks/inference_latency.py``'s per-step timing (``timed_steps``): the wrapper it puts on the prefix-cached
samplers' step function sees every denoising step of one ``sample_actions`` call, changes nothing the call computes,
and is gone afterwards; the prefix (vision, language, the keys/values every step reads) runs once per call, as in
lerobot (the KV-cache check of issue 29)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from benchmarks.inference_latency import SAMPLING_STEPS, STEP_FUNCTIONS, timed_steps
from benchmarks.lerobot_cases import load_case
from benchmarks.lerobot_cases.runner import sized
from embodied_models.pi05.batch import Pi05PreparedBatch
from embodied_models.pi05.modeling import Pi05Model
from embodied_models.smolvla.modeling import SmolVLAModel
from tests.models.test_smolvla_golden import FIXTURE, fixture_batch, fixture_configs, one_thread  # noqa: F401


def _pi05() -> tuple[Pi05Model, Any, torch.Tensor]:
    case = load_case("pi05")
    size = sized(case, "tiny", None)
    inputs = case.make_inputs(size)
    torch.manual_seed(0)
    model = case.our_model(size).eval()
    batch = Pi05PreparedBatch(images=inputs["images"], image_masks=inputs["image_masks"],
                              tokens=inputs["lang_tokens"], token_mask=inputs["lang_mask"], actions=None)
    return model, batch, inputs["noise"]


def _smolvla() -> tuple[SmolVLAModel, Any, torch.Tensor]:
    inputs = {k: v.clone() for k, v in load_file(FIXTURE / "inputs.safetensors").items()}
    torch.manual_seed(0)
    model = SmolVLAModel(*fixture_configs()).eval()
    return model, fixture_batch(inputs), inputs["noise"]


BUILDERS = {"pi05": _pi05, "smolvla": _smolvla}  # smolvla: the golden fixture's config (4 steps)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_denoising_step_is_timed_and_the_prefix_runs_once(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, batch, noise = BUILDERS[name]()
    owner = type(model)
    method = STEP_FUNCTIONS[(name, True)][2]
    original = owner.__dict__[method]
    prefix_passes = []
    fill = owner.fill_prefix_cache
    monkeypatch.setattr(owner, "fill_prefix_cache", lambda self, b: prefix_passes.append(1) or fill(self, b))

    with torch.no_grad():
        plain = model.sample_actions(batch, noise=noise)
        assert len(prefix_passes) == 1
        with timed_steps(name, "ours") as durations:
            timed = model.sample_actions(batch, noise=noise)
    assert durations is not None and len(durations) == model.config.num_inference_steps
    assert all(d > 0 for d in durations)
    assert len(prefix_passes) == 2  # once per call, whatever the number of steps
    torch.testing.assert_close(timed, plain, rtol=0, atol=0)
    assert owner.__dict__[method] is original


def test_the_benchmarks_pi05_samples_the_steps_the_script_divides_by() -> None:
    model, _, _ = _pi05()  # the benchmark's case at the tiny size (lerobot's default step count)
    assert model.config.num_inference_steps == SAMPLING_STEPS["pi05"]


def test_models_without_a_named_step_function_get_no_wrapper() -> None:
    with timed_steps("xvla", "ours") as durations:
        assert durations is None
