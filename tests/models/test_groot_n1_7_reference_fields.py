"""GR00T N1.7's reference fields (the README's "Reference fields" table, embodied_models.groot_n1_7.reference): every
key fixed to the value this port implements is refused at any other value with a config error naming it, in the
official Gr00tN1d7 config.json and in lerobot's groot policy config, and a config.json beside
--pretrained-checkpoint is checked with the run config, before anything is built. Config construction only."""

from __future__ import annotations

import json

import pytest

from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError
from embodied_core.validation import validate_run_config
from embodied_models.groot_n1_7.reference import (
    DIT_FIXED,
    FIXED,
    MODEL_FIELDS,
    POLICY_FIXED,
    POLICY_RUN_KEYS,
    RUN_KEYS,
    VL_FIXED,
    reference_model_fields,
)


def _other(value):
    """A value the reference accepts but this port does not implement."""
    if isinstance(value, bool):
        return not value
    if value is None:
        return "sinusoidal"
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2
    return f"not_{value}"


CASES = ([(None, key, values) for key, values in FIXED.items()]
         + [("diffusion_model_cfg", key, values) for key, values in DIT_FIXED.items()]
         + [("vl_self_attention_cfg", key, values) for key, values in VL_FIXED.items()])


@pytest.mark.parametrize(("section", "key", "supported"), CASES, ids=[f"{s or 'top'}.{k}" for s, k, _ in CASES])
def test_official_config_values_this_port_does_not_implement_are_refused(section, key, supported):
    value = _other(supported[0])
    doc = {"model_type": "Gr00tN1d7", **({section: {key: value}} if section else {key: value})}
    with pytest.raises(ConfigError) as err:
        reference_model_fields(doc)
    name = f"{section}.{key}" if section else key
    assert f"{name} = {value!r} is not implemented" in str(err.value)
    assert reference_model_fields({**doc, **({section: {key: supported[0]}} if section else {key: supported[0]})}) \
        is not None  # the supported value passes


@pytest.mark.parametrize("key", sorted(POLICY_FIXED))
def test_lerobot_policy_config_values_this_port_does_not_implement_are_refused(key):
    value = _other(POLICY_FIXED[key][0]) if key != "action_decode_transform" else "libero"
    with pytest.raises(ConfigError, match=f"{key} = {value!r} is not implemented"):
        reference_model_fields({"type": "groot", key: value})


def test_the_tables_do_not_overlap_and_split_dropout_is_refused():
    assert not set(MODEL_FIELDS) & set(FIXED) and not set(MODEL_FIELDS) & set(RUN_KEYS)
    assert not set(FIXED) & set(RUN_KEYS) and not set(POLICY_FIXED) & set(POLICY_RUN_KEYS)
    with pytest.raises(ConfigError, match=r"one model\.dropout for both"):
        reference_model_fields({"model_type": "Gr00tN1d7", "diffusion_model_cfg": {"dropout": 0.2},
                                "vl_self_attention_cfg": {"dropout": 0.1}})
    fields = reference_model_fields({"model_type": "Gr00tN1d7", "select_layer": 12, "num_timestep_buckets": 500,
                                     "diffusion_model_cfg": {"num_layers": 16, "output_dim": 1024},
                                     "hidden_size": 1024})
    assert fields == {"select_layer": 12, "num_timestep_buckets": 500, "dit_num_layers": 16, "hidden_size": 1024}


def _run_config(folder, **model):
    cfg = load_config(training={"model_name": "groot_n1_7_tiny", "dataset_path": "/data",
                                "pretrained_checkpoint": str(folder)}, model=model,
                      data={"state_dim": 8, "action_dim": 7, "camera_keys": ["observation.images.cam"]})
    validate_run_config(cfg, world_size=1)
    return cfg


def test_a_config_json_beside_the_checkpoint_is_checked_before_building(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "Gr00tN1d7", "use_relative_action": True,
                                                      "num_timestep_buckets": 500}))
    with pytest.raises(ConfigError) as err:
        _run_config(tmp_path)
    message = str(err.value)
    assert "use_relative_action = True is not implemented" in message
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "Gr00tN1d7", "num_timestep_buckets": 500}))
    with pytest.raises(ConfigError, match=r"model\.num_timestep_buckets=500 \(checkpoint\) vs 1000 \(model\)"):
        _run_config(tmp_path)
    assert _run_config(tmp_path, num_timestep_buckets=500).model.num_timestep_buckets == 500
    (tmp_path / "config.json").write_text(json.dumps({"type": "groot", "use_relative_actions": True}))
    with pytest.raises(ConfigError, match="use_relative_actions = True is not implemented"):
        _run_config(tmp_path)
