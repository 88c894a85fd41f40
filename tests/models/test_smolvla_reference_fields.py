"""Every field of lerobot 0.6.1's ``SmolVLAConfig`` (and of the SmolVLM config it builds on) that this port fixes is
refused with another value, naming it, when a lerobot config is read (``lerobot_configs``, the importer's
translation); the table is in the smolvla README under "Reference fields". Config dictionaries only.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from embodied_core.config.converter import structure
from embodied_core.errors import ConfigError, UsageError
from embodied_models.smolvla.config import SmolVLAModelConfig
from embodied_models.smolvla.lerobot_import import lerobot_configs
from embodied_models.smolvla.reference import POLICY_FIXED, RUN_KEYS, TEXT_FIXED, VISION_FIXED
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "smolvla_prefix_length"
POLICY = json.loads((FIXTURE / "config.json").read_text())
"""lerobot's own config.json (SmolVLAConfig._save_pretrained) of the second golden."""
VLM = json.loads((FIXTURE / "vlm_config.json").read_text())

REFUSED = [
    ("", "n_obs_steps", 2),
    ("", "adapt_to_pi_aloha", True),
    ("", "use_delta_joint_actions_aloha", True),
    ("", "use_cache", False),
    ("", "pad_language_to", "do_not_pad"),
    ("text_config.", "hidden_act", "gelu"),
    ("text_config.", "attention_bias", True),
    ("text_config.", "mlp_bias", True),
    ("vision_config.", "hidden_act", "gelu"),
    ("vision_config.", "num_channels", 1),
    ("vision_config.", "attention_dropout", 0.1),
]


def _read(policy: dict, vlm: dict) -> tuple[dict, dict]:
    return lerobot_configs(policy, vlm, model_defaults={}, data_defaults={}, source=FIXTURE / "config.json")


def _with(section: str, key: str, value: object) -> tuple[dict, dict]:
    policy, vlm = copy.deepcopy(POLICY), copy.deepcopy(VLM)
    target = vlm[section.rstrip(".")] if section else policy
    target[key] = value
    return policy, vlm


def test_every_fixed_field_is_listed():
    listed = {(section, key) for section, key, _ in REFUSED}
    assert listed == ({("", k) for k in POLICY_FIXED} | {("text_config.", k) for k in TEXT_FIXED}
                      | {("vision_config.", k) for k in VISION_FIXED})
    assert not set(POLICY_FIXED) & set(RUN_KEYS)


@pytest.mark.parametrize(("section", "key", "value"), REFUSED, ids=[f"{s}{k}" for s, k, _ in REFUSED])
def test_a_value_this_port_does_not_implement_is_refused(section, key, value):
    name = re.escape(f"{section}{key}={json.dumps(value)}")
    with pytest.raises(UsageError, match=rf"config\.json: (.*; )?{name} is not ported \(supported: "):
        _read(*_with(section, key, value))


def test_the_fixtures_values_and_the_equivalent_ones_are_accepted():
    model, data = _read(POLICY, VLM)
    assert model["prefix_length"] == 72 and data["action_horizon"] == 7
    for value in ("longest", "max_length"):
        _read(*_with("", "pad_language_to", value))
    _read(*_with("", "rtc_config", {"enabled": False, "execution_horizon": 10}))


def test_real_time_chunking_and_another_vision_resolution_are_refused():
    with pytest.raises(UsageError, match=r"rtc_config=\{\"enabled\": true\} is not ported"):
        _read(*_with("", "rtc_config", {"enabled": True}))
    with pytest.raises(UsageError, match=r"vision_config\.image_size 64 differs from resize_imgs_with_padding 32"):
        _read(*_with("vision_config.", "image_size", 64))


@pytest.mark.parametrize(("key", "value", "message"), [
    ("attention_mode", "cross", "model.attention_mode"),
    ("self_attn_every_n_layers", 0, "model.self_attn_every_n_layers"),
])
def test_layouts_lerobot_accepts_and_this_port_does_not_are_config_errors(key, value, message):
    """lerobot takes any attention_mode containing "cross" and self_attn_every_n_layers <= 0 (every layer cross)."""
    model, _ = _read(*_with("", key, value))
    with pytest.raises(ConfigError, match=re.escape(message)):
        structure(model, SmolVLAModelConfig, path="model", source="config.json")


def test_a_checkpoint_config_describing_another_network_is_refused(tmp_path):
    from embodied_core.config.resolve import load_config
    from embodied_models.smolvla.checkpoint import load_smolvla_checkpoint
    from embodied_models.smolvla.checks import check_run_config
    from embodied_models.smolvla.reference import checkpoint_config_problems

    model, _ = _read(POLICY, VLM)
    ours = SmolVLAModelConfig(**model)
    assert checkpoint_config_problems(ours, FIXTURE / "model.safetensors") == []
    assert checkpoint_config_problems(SmolVLAModelConfig(**{**model, "num_expert_layers": 0, "num_vlm_layers": 3}),
                                      FIXTURE) != []
    class Model:  # the loader checks the config before it reads a tensor
        config = SmolVLAModelConfig(**{**model, "prefix_length": -1})

    with pytest.raises(ConfigError, match=r"model\.prefix_length=72 \(checkpoint\) vs -1 \(model\)"):
        load_smolvla_checkpoint(Model(), FIXTURE / "model.safetensors")
    folder = tmp_path / "pretrained_model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**POLICY, "use_cache": False}))
    (folder / "model.safetensors").write_bytes(b"")
    problems = check_run_config(load_config("smolvla_tiny", training={"pretrained_checkpoint": str(tmp_path)}))
    assert any("use_cache=false is not ported" in p for p in problems), problems
    # smolvla_base's own config (lerobot's defaults) agrees with our smolvla preset
    (folder / "config.json").write_text(json.dumps({"type": "smolvla"}))
    assert checkpoint_config_problems(load_config("smolvla").model, tmp_path) == []
