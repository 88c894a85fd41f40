"""LingBot-VA's lerobot reference fields (the README's "Reference fields" table): the fields added for it
(video_exec_step, attn_window, image_hflip) refuse values the reference does not have, with a config error naming
the field, and do what lerobot's do (video_exec_step against lerobot itself: test_lingbot_va_second_golden.py)."""

from __future__ import annotations

import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError
from embodied_core.validation import validate_run_config

TRAINING = {"model_name": "lingbot_va_tiny", "dataset_path": "/data", "trainer_type": "lingbot_va",
            "dataset_strategy": "lingbot_va"}


def _config(model=None, data=None):
    """The run config as `embodied train` checks it before building anything."""
    cfg = load_config(training=TRAINING, model=model or {}, data=data or {})
    validate_run_config(cfg, world_size=1)
    return cfg


@pytest.mark.parametrize(("field", "value", "message"), [
    ("video_exec_step", 0, "valid are -1 (all steps) or 1..2"),
    ("video_exec_step", 3, "valid are -1 (all steps) or 1..2"),  # lingbot_va_tiny has 2 video steps
    ("attn_window", 1, "must be >= 2"),
])
def test_values_the_reference_does_not_have_are_config_errors(field, value, message):
    with pytest.raises(ConfigError) as err:
        _config(model={field: value})
    assert f"model.{field}={value}" in str(err.value) and message in str(err.value)


def test_reference_values_are_accepted():
    cfg = _config(model={"video_exec_step": 2, "attn_window": 8}, data={"image_hflip": True})
    assert (cfg.model.video_exec_step, cfg.model.attn_window, cfg.data.image_hflip) == (2, 8, True)


def test_attn_window_sizes_the_streaming_cache():
    from embodied_models.lingbot_va.modeling import build_model
    from embodied_models.lingbot_va.streaming import StreamingSession

    cfg = _config(model={"attn_window": 8}, data={"action_dim": 4})
    model = build_model(cfg.model, cfg.data)
    assert StreamingSession(model, torch.zeros(1, 4, 16)).cache.max_chunks == 4  # lerobot: attn_window // 2
    assert StreamingSession(model, torch.zeros(1, 4, 16), max_chunks=2).cache.max_chunks == 2


def test_image_hflip_mirrors_the_frames_before_encoding():
    from embodied_models.lingbot_va.config import LingBotVADataConfig
    from embodied_models.lingbot_va.vae import StreamingVAEEncoder
    from embodied_models.wan.vae import build_tiny_vae

    vae = build_tiny_vae(seed=0)
    data = LingBotVADataConfig(camera_keys=["observation.images.a"], image_size=(32, 32), action_horizon=16)
    flipped = StreamingVAEEncoder(vae, LingBotVADataConfig(**{**_fields(data), "image_hflip": True}))
    clip = torch.randint(0, 256, (1, 3, 40, 48), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    want = StreamingVAEEncoder(vae, data)([clip.flip(-1)])
    assert torch.equal(flipped([clip]), want)
    assert not torch.equal(StreamingVAEEncoder(vae, data)([clip]), want)


def _fields(config):
    import attrs

    return attrs.asdict(config, recurse=False)


# --- a lerobot config.json beside the checkpoint (embodied_models.lingbot_va.reference) ---


@pytest.mark.parametrize(("key", "value"), [("attn_mode", "xformers"), ("dtype", "float64"), ("n_obs_steps", 2)])
def test_lerobot_config_values_this_port_does_not_implement_are_refused(key, value):
    from embodied_models.lingbot_va.reference import reference_model_fields

    with pytest.raises(ConfigError, match=f"{key} = {value!r} is not implemented"):
        reference_model_fields({"type": "lingbot_va", key: value})


def test_lerobot_config_defaults_and_attn_modes():
    from embodied_models.lingbot_va.reference import reference_model_fields

    fields = reference_model_fields({"type": "lingbot_va", "attn_mode": "flashattn", "video_exec_step": 3})
    assert fields["action_snr_shift"] == 0.05 and fields["text_len"] == 512 and fields["attention_backend"] == "sdpa"
    assert fields["video_exec_step"] == 3 and fields["used_action_channel_ids"] == list(range(7))


def test_a_lerobot_config_beside_the_checkpoint_is_checked_before_building(tmp_path):
    import json

    from embodied_models.lingbot_va.reference import MODEL_FIELDS

    cfg = _config(data={"action_dim": 4})
    doc = {"type": "lingbot_va", **{key: getattr(cfg.model, field) for key, (field, _) in MODEL_FIELDS.items()}}
    doc["patch_size"] = list(doc["patch_size"])
    (tmp_path / "config.json").write_text(json.dumps({**doc, "action_snr_shift": 0.05}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    training = {**TRAINING, "pretrained_checkpoint": str(tmp_path / "model.safetensors")}
    with pytest.raises(ConfigError, match=r"model\.action_snr_shift=0\.05 \(checkpoint\) vs 1\.0 \(model\)"):
        validate_run_config(load_config(training=training, data={"action_dim": 4}), world_size=1)
    agreed = load_config(training=training, model={"action_snr_shift": 0.05, "guidance_scale": 2.0},
                         data={"action_dim": 4})
    validate_run_config(agreed, world_size=1)  # guidance is a sampling choice: not compared
