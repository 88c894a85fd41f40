"""Every field of lerobot 0.6.1's ``PI05Config`` is mapped onto ``model.*``, fixed with a refusal of any other value,
or a setting of the run (embodied_models.pi05.reference; the table is in the pi05 README under "Reference fields").
A lerobot config.json beside --pretrained-checkpoint must describe the model config's network. Config dictionaries
only: nothing is built.
"""

from __future__ import annotations

import copy
import json
import logging
import re

import pytest

from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError
from embodied_models.pi05.checkpoint import load_pi05_checkpoint
from embodied_models.pi05.checks import check_run_config
from embodied_models.pi05.config import Pi05ModelConfig
from embodied_models.pi05.reference import (
    FIXED,
    MODEL_FIELDS,
    NOT_COMPARED,
    RUN_KEYS,
    checkpoint_config_problems,
    reference_model_fields,
)
from tests.support import REPO_ROOT

DOC = json.loads((REPO_ROOT / "tests" / "fixtures" / "pi05_gqa_patch7" / "lerobot_config.json").read_text())
"""lerobot's own PI05Config._save_pretrained output (the second golden's run)."""

REFUSED = [("n_obs_steps", 2), ("use_relative_actions", True), ("dtype", "float16")]


def test_every_fixed_field_is_listed_and_every_key_lerobot_writes_is_known(caplog):
    assert {key for key, _ in REFUSED} == set(FIXED)
    known = set(MODEL_FIELDS) | set(FIXED) | set(RUN_KEYS) | {"paligemma_variant", "action_expert_variant"}
    assert set(DOC) <= known
    assert set(NOT_COMPARED) <= {field for field, _ in MODEL_FIELDS.values()}
    with caplog.at_level(logging.WARNING):
        reference_model_fields(DOC)
    assert not caplog.records


@pytest.mark.parametrize(("key", "value"), REFUSED)
def test_a_value_this_port_does_not_implement_is_a_config_error(key, value):
    with pytest.raises(ConfigError, match=rf"ckpt/config\.json: {re.escape(key)} = {re.escape(repr(value))} is not "
                       r"implemented by this port \(supported: "):
        reference_model_fields({**DOC, key: value}, source="ckpt/config.json")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("rtc_config", {"enabled": True}, "rtc_config = {'enabled': True} is not implemented by this port"),
    ("image_resolution", [224, 256], "image_resolution = [224, 256]: PaliGemma needs a square resolution"),
    ("paligemma_variant", "gemma_7b", "paligemma_variant = 'gemma_7b' is not a Gemma variant"),
])
def test_other_settings_this_port_does_not_run_are_config_errors(key, value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        reference_model_fields({**DOC, key: value})
    reference_model_fields({**DOC, "rtc_config": {"enabled": False}})


def test_our_defaults_are_the_released_config():
    """A config.json holding only lerobot's defaults (pi05_base's sizes) agrees with Pi05ModelConfig()."""
    fields = reference_model_fields({"type": "pi05"})
    model = Pi05ModelConfig()
    assert {name: getattr(model, name) for name in fields} == fields


def test_a_checkpoint_config_describing_another_network_is_refused(tmp_path):
    folder = tmp_path / "pretrained_model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(copy.deepcopy(DOC)))
    (folder / "model.safetensors").write_bytes(b"")  # never read: the config check comes first
    run = load_config("pi05_tiny", training={"pretrained_checkpoint": str(tmp_path)})
    problems = check_run_config(run)
    assert any("describes another pi0.5 than the model config" in p and "model.vlm_width=2048 (checkpoint) vs 64 "
               "(model)" in p and "model.max_action_dim=12 (checkpoint) vs 32 (model)" in p for p in problems), problems
    assert checkpoint_config_problems(Pi05ModelConfig(max_action_dim=12, max_state_dim=16, min_period=0.01,
                                                      max_period=2.0), tmp_path) == []

    class Model:  # the loader checks the config before it reads a tensor
        config = run.model

    with pytest.raises(ConfigError, match=r"model\.vlm_width=2048 \(checkpoint\) vs 64 \(model\)"):
        load_pi05_checkpoint(Model(), folder / "model.safetensors")
