"""Every field of the reference's X-VLA config (lerobot 0.6.1 ``XVLAConfig`` and its Florence-2 config) is mapped onto
``model.*``, fixed with a refusal of any other value, or declared unused (embodied_models.xvla.reference; the table is
in the xvla README under "Reference fields"). Config dictionaries only: nothing is built.
"""

from __future__ import annotations

import copy
import json
import re

import attrs
import pytest

from embodied_core.errors import ConfigError
from embodied_models.xvla.config import XvlaModelConfig
from embodied_models.xvla.reference import (
    FLORENCE_FIXED,
    NOT_COMPARED,
    NOT_USED,
    POLICY_FIELDS,
    POLICY_FIXED,
    RUN_KEYS,
    TEXT_ALIASES,
    TEXT_FIELDS,
    TEXT_FIXED,
    VISION_FIELDS,
    VISION_FIXED,
    config_disagreements,
    florence_model_fields,
    reference_model_fields,
)
from tests.support import REPO_ROOT

DOC = json.loads((REPO_ROOT / "tests" / "fixtures" / "xvla_scaled_text" / "config.json").read_text())
"""lerobot's own config.json of the second golden (remote-code vision config)."""

REFUSED = [
    ("florence_config.vision_config", "in_channels", 4),
    ("florence_config.vision_config", "qkv_bias", False),
    ("florence_config.vision_config", "activation_function", "relu"),
    ("florence_config.vision_config", "model_type", "clip_vision_model"),
    ("florence_config.vision_config", "image_feature_source", ["spatial_avg_pool", "last_frame"]),
    ("florence_config.text_config", "activation_function", "relu"),
    ("florence_config.text_config", "encoder_layerdrop", 0.1),
    ("florence_config.text_config", "pad_token_id", 0),
    ("florence_config.text_config", "bos_token_id", 1),
    ("florence_config.text_config", "eos_token_id", 3),
    ("florence_config.text_config", "model_type", "mbart"),
    ("florence_config", "pad_token_id", 0),
    ("florence_config", "bos_token_id", 2),
    ("florence_config", "eos_token_id", 1),
    ("florence_config", "model_type", "llava"),
    ("", "n_obs_steps", 2),
    ("", "tokenizer_padding_side", "left"),
    ("", "pad_language_to", "longest"),
]


def _set(doc: dict, section: str, key: str, value: object) -> dict:
    doc = copy.deepcopy(doc)
    target = doc
    for part in filter(None, section.split(".")):
        target = target[part]
    target[key] = value
    return doc


def test_every_fixed_field_is_listed():
    fixed = {("florence_config.vision_config", k) for k in VISION_FIXED} | {
        ("florence_config.text_config", k) for k in TEXT_FIXED} | {("florence_config", k) for k in FLORENCE_FIXED} | {
        ("", k) for k in POLICY_FIXED}
    assert {(section, key) for section, key, _ in REFUSED} == fixed


@pytest.mark.parametrize(("section", "key", "value"), REFUSED, ids=[f"{s}.{k}".lstrip(".") for s, k, _ in REFUSED])
def test_a_value_this_port_does_not_implement_is_a_config_error(section, key, value):
    name = re.escape(f"{section}.{key}".lstrip("."))
    with pytest.raises(ConfigError, match=rf"ckpt/config\.json: .*\b{name} = "):
        reference_model_fields(_set(DOC, section, key, value), source="ckpt/config.json")
    reference_model_fields(DOC)  # the fixture's own values are the supported ones


@pytest.mark.parametrize(("key", "value", "supported"), [("image_pos_embed", {"type": "sine"}, "learned_abs_2d"),
                                                         ("visual_temporal_embedding", {"type": "LEARNED"}, "COSINE")])
def test_other_remote_code_embeddings_are_refused(key, value, supported):
    with pytest.raises(ConfigError, match=rf"vision_config\.{key}\.type = .*supported: '{supported}'"):
        reference_model_fields(_set(DOC, "florence_config.vision_config", key, value))


def test_unknown_keys_are_named_in_a_warning_and_inconsistent_ones_are_errors(caplog):
    doc = _set(DOC, "florence_config.text_config", "normalize_before", True)  # mBART's pre-LN: another network
    doc = _set(doc, "", "chunk_sise", 8)
    with caplog.at_level("WARNING", logger="embodied.models.xvla"):
        reference_model_fields(doc, source="unknown/config.json")
    assert "unknown/config.json: florence_config.text_config.normalize_before is not known to the X-VLA port" in (
        caplog.text)
    assert "chunk_sise is not known to the X-VLA port and is not read (did you mean 'chunk_size'?)" in caplog.text
    with pytest.raises(ConfigError, match=r"text_config\.num_hidden_layers 5 differs from "
                       r"florence_config\.text_config\.encoder_layers 2"):
        reference_model_fields(_set(doc, "florence_config.text_config", "num_hidden_layers", 5))


def test_mapped_fields_exist_and_absent_keys_take_the_references_defaults():
    ours = {field.name for field in attrs.fields(XvlaModelConfig)}
    for table in (VISION_FIELDS, TEXT_FIELDS, POLICY_FIELDS):
        assert {field for field, _ in table.values()} <= ours
    assert set(NOT_COMPARED) <= ours
    fields = florence_model_fields({"vision_config": {}, "text_config": {}})
    assert fields["text_attention_dropout"] == 0.0 and fields["text_scale_embedding"] is False
    assert fields["vision_embed_dim"] == [128, 256, 512, 1024]


def test_the_default_tables_are_transformers_defaults():
    from transformers import BartConfig
    from transformers.models.florence2.configuration_florence2 import Florence2VisionConfig

    vision, text = Florence2VisionConfig(), BartConfig()
    for key, (_, default) in VISION_FIELDS.items():
        value = getattr(vision, key)
        assert (list(value) if isinstance(value, tuple) else value) == default, key
    for key, (_, default) in TEXT_FIELDS.items():
        assert getattr(text, key) == default, key
    for fixed, config in ((VISION_FIXED, vision), (TEXT_FIXED, text)):
        for key, supported in fixed.items():
            if key != "image_feature_source" and key != "model_type":
                assert getattr(config, key) == supported[0], key


def test_every_key_transformers_and_lerobot_write_is_accounted_for():
    from transformers import BartConfig, Florence2Config
    from transformers.models.florence2.configuration_florence2 import Florence2VisionConfig

    vision_known = set(VISION_FIELDS) | set(VISION_FIXED) | set(NOT_USED)
    text_known = set(TEXT_FIELDS) | set(TEXT_FIXED) | set(TEXT_ALIASES) | set(NOT_USED)
    top_known = {"vision_config", "text_config"} | set(FLORENCE_FIXED) | set(NOT_USED)
    assert set(Florence2VisionConfig().to_dict()) <= vision_known
    assert set(BartConfig().to_dict()) <= text_known
    assert set(Florence2Config().to_dict()) <= top_known
    policy_known = set(POLICY_FIELDS) | set(POLICY_FIXED) | set(RUN_KEYS) | {"florence_config"}
    assert set(DOC) <= policy_known  # lerobot's XVLAConfig._save_pretrained writes all of its fields


def test_disagreements_name_the_field_and_skip_what_a_fine_tune_chooses():
    fields = reference_model_fields(DOC)
    model = XvlaModelConfig(**{**fields, "text_dropout": 0.0, "num_denoising_steps": 7, "action_mode": "auto"})
    assert config_disagreements(model, fields) == []
    model = XvlaModelConfig(**{**fields, "vision_window_size": 4, "text_num_heads": 4})
    assert config_disagreements(model, fields) == ["model.vision_window_size=3 (checkpoint) vs 4 (model)",
                                                   "model.text_num_heads=3 (checkpoint) vs 4 (model)"]


def test_the_dropouts_reach_bart():
    from embodied_models.xvla.florence import florence_config

    text = florence_config(XvlaModelConfig(text_dropout=0.2)).text_config
    assert (text.dropout, text.attention_dropout, text.activation_dropout) == (0.2, 0.2, 0.2)
    text = florence_config(XvlaModelConfig(text_dropout=0.2, text_attention_dropout=0.0, text_activation_dropout=0.05,
                                           text_scale_embedding=True)).text_config
    assert (text.dropout, text.attention_dropout, text.activation_dropout, text.scale_embedding) == (0.2, 0.0, 0.05,
                                                                                                    True)
