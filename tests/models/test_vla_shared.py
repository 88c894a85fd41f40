"""embodied_models.vla: the pieces the VLA ports share keep the ports' contracts (field order, host fields, flow
integration, checks that ignore other models). The ports' goldens cover the numerics end to end."""

from __future__ import annotations

import json
import re

import attrs
import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_models.groot_n1_7.batch import GrootBatch
from embodied_models.pi05.checks import check_run_config as pi05_checks
from embodied_models.pi05.config import Pi05ModelConfig
from embodied_models.smolvla.batch import SmolVLAPreparedBatch
from embodied_models.smolvla.config import SmolVLAModelConfig
from embodied_models.vla.fields import FlowTimeFields, place_after
from embodied_models.vla.flow import euler_sample

FLOW_TIME = [f.name for f in attrs.fields(FlowTimeFields)]


@pytest.mark.parametrize("config", [Pi05ModelConfig, SmolVLAModelConfig])
def test_flow_time_fields_stay_after_num_inference_steps(config):
    names = [f.name for f in attrs.fields(config)]
    at = names.index("num_inference_steps")
    assert names[at + 1: at + 1 + len(FLOW_TIME)] == FLOW_TIME  # --help and YAML order of the ports
    assert config(time_scale=0.9995).validate()[0].startswith("model.time_scale + model.time_offset must be <= 1")


def test_place_after_names_a_missing_anchor():
    with pytest.raises(TypeError, match="anchor 'steps' is not one of its fields"):
        @attrs.define(kw_only=True, field_transformer=place_after("steps", FlowTimeFields))
        class Broken(FlowTimeFields):
            other: int = 0


def test_tensor_fields_move_tuples_and_keep_host_fields():
    t = torch.zeros(2, 3)
    moved = GrootBatch(images=t, input_ids=t, attention_mask=t, image_mask=t, position_ids=t, state=t,
                       embodiment_id=t, sample_index=t).to("meta")
    assert moved.images.is_meta and moved.sample_index.device.type == "cpu" and moved.actions is None
    slots = SmolVLAPreparedBatch(images=(t, t), image_masks=t, tokens=t, token_mask=t, state=t).to("meta")
    assert isinstance(slots.images, tuple) and all(image.is_meta for image in slots.images)


def test_euler_sample_integrates_from_one_to_zero():
    noise = torch.randn(3, 4, 2)
    times = []

    def velocity(x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        times.append(float(t[0]))
        return torch.full_like(x_t, 2.0)

    out = euler_sample(velocity, noise, 4)
    assert times == [1.0, 0.75, 0.5, 0.25]
    torch.testing.assert_close(out, noise - 2.0)  # a constant velocity: x_0 = x_1 - v


def test_run_config_check_ignores_other_models(monkeypatch):
    monkeypatch.delenv("TOKENIZER_PATH", raising=False)
    assert pi05_checks(load_config(training={"model_name": "smolvla_tiny"})) == []
    problems = pi05_checks(load_config(training={"model_name": "pi05"}))
    assert any("PaliGemma tokenizer" in p for p in problems)


def test_checkpoint_config_checks_read_refuse_and_compare(tmp_path):
    """A port's binding of vla.reference.checkpoint_config_checks (lingbot_va's: the default comparison), through
    each of its answers; smolvla's refusals and GR00T N1.7's two document kinds take the same tail."""
    from embodied_core.errors import ConfigError
    from embodied_models.groot_n1_7.reference import checkpoint_config_problems as groot_problems
    from embodied_models.lingbot_va.reference import MODEL_FIELDS, check_checkpoint_config, checkpoint_config_problems
    from embodied_models.smolvla.reference import checkpoint_config_problems as smolvla_problems

    model, path = load_config("lingbot_va_tiny").model, tmp_path / "config.json"
    assert checkpoint_config_problems(model, tmp_path) == []  # no config.json
    path.write_text("{")
    assert checkpoint_config_problems(model, tmp_path)[0].startswith(f"{path}: not readable JSON")
    path.write_text(json.dumps({"type": "act"}))
    assert checkpoint_config_problems(model, tmp_path / "model.safetensors") == []  # another policy's config
    path.write_text(json.dumps({"type": "lingbot_va", "attn_mode": "bogus"}))
    assert checkpoint_config_problems(model, tmp_path) == [
        f"invalid configuration: {path}: attn_mode = 'bogus' is not implemented by this port (supported: 'torch' or "
        "'flashattn' or 'flex')"]
    ours = {"type": "lingbot_va", **{key: getattr(model, field) for key, (field, _) in MODEL_FIELDS.items()}}
    path.write_text(json.dumps(ours))
    assert checkpoint_config_problems(model, tmp_path) == []
    path.write_text(json.dumps({**ours, "num_layers": 3, "guidance_scale": 9.0}))  # guidance: not compared
    message = (f"{path} describes another LingBot-VA than the model config: model.num_layers=3 (checkpoint) vs 2 "
               "(model); set those model fields (or load a matching checkpoint)")
    assert checkpoint_config_problems(model, tmp_path) == [message]
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_checkpoint_config(model, tmp_path)

    path.write_text(json.dumps({"type": "smolvla", "use_cache": False}))
    assert smolvla_problems(load_config("smolvla").model, tmp_path) == [
        f"{path}: use_cache=false is not ported (supported: true; sampling always reads the prefix KV cache "
        "(lerobot's use_cache=false runs the expert without the prefix))"]
    groot = load_config("groot_n1_7_tiny").model
    path.write_text(json.dumps({"model_type": "groot", "max_state_dim": groot.max_state_dim + 1}))
    assert groot_problems(groot, tmp_path) == []  # lerobot's kind is its "type"
    for doc in ({"type": "groot"}, {"model_type": "Gr00tN1d7"}):
        path.write_text(json.dumps({**doc, "max_state_dim": groot.max_state_dim + 1}))
        assert groot_problems(groot, tmp_path) == [
            f"{path} describes another GR00T N1.7 than the model config: model.max_state_dim="
            f"{groot.max_state_dim + 1} (checkpoint) vs {groot.max_state_dim} (model); set those model fields (or "
            "load a matching checkpoint)"]
