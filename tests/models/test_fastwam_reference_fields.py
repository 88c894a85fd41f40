"""FastWAM's lerobot reference fields (the README's "Reference fields" table): values we do not implement are config
errors naming the field, and the fields added for the table (use_proprio, inference_seed, rand_device,
fp32_attention, prompt_template, toggle_action_dimensions) do what lerobot's do. Config construction and tiny
modules only."""

from __future__ import annotations

import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError
from embodied_core.validation import validate_run_config
from embodied_models.fastwam.data.prompts import PROMPT_TEMPLATE, format_prompt
from embodied_models.fastwam.reference import FIXED, VIDEO_FIXED, reference_model_fields

DATA = {"action_dim": 7, "state_dim": 5, "text_dim": 16}


def _config(model=None, data=None):
    """The run config as `embodied train` checks it before building anything (fields, then cross-field rules)."""
    cfg = load_config(training={"model_name": "fastwam_tiny", "dataset_path": "/data"}, model=model or {},
                      data={**DATA, **(data or {})})
    validate_run_config(cfg, world_size=1)
    return cfg


@pytest.mark.parametrize(("section", "field", "value", "supported"), [
    ("model", "action_conditioned", True, "only False is supported"),  # lerobot video_dit_config.action_conditioned
    ("data", "normalization_mode", "min_max", "q01_q99"),  # lerobot NormalizationMode.MIN_MAX
    ("data", "normalization_mode", "quantiles", "q01_q99"),  # lerobot NormalizationMode.QUANTILES
    ("model", "rand_device", "mps", "valid are cpu, cuda"),
    ("data", "prompt_template", "pick {object} up", "{task}"),
    ("data", "prompt_template", "no field at all", "{task}"),
    ("data", "toggle_action_dimensions", [7], "out of range for data.action_dim=7"),
    ("data", "num_video_frames", 1, "at least 5"),  # was a ZeroDivisionError in the frame-window check
])
def test_unsupported_reference_values_are_config_errors(section, field, value, supported):
    with pytest.raises(ConfigError) as err:
        _config(**{section: {field: value}})
    assert f"{section}.{field}" in str(err.value) and supported in str(err.value)


def test_reference_defaults_are_accepted():
    cfg = _config(model={"inference_seed": 42, "rand_device": "cpu", "fp32_attention": True, "use_proprio": True,
                         "action_conditioned": False},
                  data={"prompt_template": PROMPT_TEMPLATE, "toggle_action_dimensions": [-1]})
    assert cfg.model.inference_seed == 42 and cfg.data.toggle_action_dimensions == [-1]


def test_prompt_template_reaches_the_prompts():
    template = "Robot view, instruction: {task}"
    assert format_prompt("open the drawer", template) == "Robot view, instruction: open the drawer"
    assert format_prompt("A video recorded from above: wipe", template) == "A video recorded from above: wipe"


def test_toggle_action_dimensions_after_unnormalizing():
    from embodied_models.fastwam.data.transforms import ActionPostprocess, Normalizer

    norm = Normalizer(mode="mean_std", offset=torch.zeros(3), scale=torch.ones(3))
    actions = torch.tensor([[[0.2, 1.0, 0.0], [0.2, 0.3, 0.5]]])
    out = ActionPostprocess(norm, (-2,))(actions)
    # lerobot's FastWAMActionToggleProcessorStep: sign(-(2a - 1)) on the toggled dims only
    assert torch.equal(out[..., 1], torch.tensor([[-1.0, 1.0]]))
    assert torch.equal(out[..., [0, 2]], actions[..., [0, 2]])


def test_use_proprio_false_drops_the_token_and_the_state():
    from embodied_models.fastwam.data.collator import FastWAMCollator
    from embodied_models.fastwam.data.transforms import FastWAMSampleTransform
    from embodied_models.fastwam.modeling import build_model

    cfg = _config(model={"use_proprio": False}, data={"missing_text_cache": "zeros", "image_size": [32, 32]})
    model = build_model(cfg.model, cfg.data)
    assert model.proprio_encoder is None and not any(k.startswith("proprio") for k in model.state_dict())
    context = torch.randn(2, 3, 16)
    ctx, mask = model.context({"context": context, "proprio": torch.randn(2, 5)})
    assert torch.equal(ctx, context) and mask.shape == (2, 3)
    stats = {"action": {"q01": [-1.0] * 7, "q99": [1.0] * 7}}  # no state statistics needed either
    transform = FastWAMSampleTransform(cfg.data, stats, use_proprio=False)
    sample = transform({"observation.images.front": torch.zeros(1, 3, 32, 32, dtype=torch.uint8), "task": "go"})
    assert "proprio" not in sample
    assert "proprio" not in FastWAMCollator(cfg.data)([sample, sample])


@pytest.mark.parametrize("fp32", [True, False])
def test_fp32_attention_under_autocast(fp32):
    from embodied_models.fastwam.blocks import attend

    q, k, v = (torch.randn(1, 4, 2, 8) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attend(q.bfloat16(), k.bfloat16(), v.bfloat16(), None, fp32=fp32)
    assert out.dtype == (torch.float32 if fp32 else torch.bfloat16)
    exact = torch.nn.functional.scaled_dot_product_attention(*(t.bfloat16().float().transpose(1, 2) for t in (q, k, v)))
    err = (out.float() - exact.transpose(1, 2).flatten(2)).abs().max().item()
    assert err < (1e-6 if fp32 else 5e-2)


def test_precompute_text_prompts_use_the_template():
    from embodied_models.fastwam.data.precompute_text import collect_prompts
    from tests.support import DATASETS_DIR

    template = "Robot view, instruction: {task}"
    prompts = collect_prompts([DATASETS_DIR / "strategies" / "fastwam_v21"], ["wave"], template=template)
    assert prompts["Robot view, instruction: wave"] == "wave"
    assert all(p == (t if t.startswith("A video recorded") else template.format(task=t)) for p, t in prompts.items())


# --- a lerobot config.json beside --pretrained-checkpoint (embodied_models.fastwam.reference) ---

FIXED_CASES = ([(None, key, values[0]) for key, values in FIXED.items()]
               + [("video_dit_config", key, values[0]) for key, values in VIDEO_FIXED.items()])


@pytest.mark.parametrize(("section", "key", "supported"), FIXED_CASES,
                         ids=[f"{s or 'top'}.{k}" for s, k, _ in FIXED_CASES])
def test_lerobot_config_values_this_port_does_not_implement_are_refused(section, key, supported):
    doc = {"type": "fastwam", **({section: {key: not supported}} if section else {key: not supported})}
    name = f"{section}.{key}" if section else key
    with pytest.raises(ConfigError, match=f"{name} = {not supported!r} is not implemented"):
        reference_model_fields(doc)


def test_one_field_for_what_both_experts_set():
    with pytest.raises(ConfigError, match=r"action_dit_config\.eps = 1e-05 differs"):
        reference_model_fields({"type": "fastwam", "video_dit_config": {"eps": 1e-6},
                                "action_dit_config": {"eps": 1e-5}})
    fields = reference_model_fields({"type": "fastwam", "proprio_dim": None, "sigma_shift": 2.0})
    assert fields["use_proprio"] is False and fields["action_infer_shift"] == 2.0 and fields["num_heads"] == 24


def _lerobot_folder(tmp_path, **changes):
    """The shared golden's weights as a lerobot policy folder with its FastWAMConfig document."""
    import json
    import shutil

    from tests.support import FIXTURES_DIR

    ref = json.loads((FIXTURES_DIR / "fastwam_lerobot" / "config.json").read_text())
    doc = {"type": "fastwam", "proprio_dim": 5, "num_inference_steps": 4, **{k: ref[k] for k in (
        "video_dit_config", "action_dit_config", "video_scheduler", "action_scheduler", "loss")}}
    for key, value in changes.items():
        section, _, name = key.rpartition(".")
        (doc[section] if section else doc)[name] = value
    shutil.copy(FIXTURES_DIR / "fastwam_lerobot" / "model.safetensors", tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(doc))
    return tmp_path


GOLDEN_MODEL = {"in_channels": 8, "out_channels": 8, "num_heads": 2, "attn_head_dim": 16, "num_layers": 2,
                "video_hidden_dim": 32, "video_ffn_dim": 64, "video_freq_dim": 16, "action_hidden_dim": 24,
                "action_ffn_dim": 48, "action_freq_dim": 12, "text_dim": 16}


def test_a_lerobot_config_beside_the_checkpoint_is_checked_before_building(tmp_path):
    folder = _lerobot_folder(tmp_path, **{"video_dit_config.video_attention_mask_mode": "bidirectional"})
    cfg = load_config(training={"model_name": "fastwam_tiny", "dataset_path": "/data",
                                "pretrained_checkpoint": str(folder / "model.safetensors")}, model=GOLDEN_MODEL,
                      data=DATA)
    with pytest.raises(ConfigError, match=r"model\.video_attention_mask_mode='bidirectional' \(checkpoint\) vs "
                                          r"'first_frame_causal' \(model\)"):
        validate_run_config(cfg, world_size=1)
    agreed = load_config(training={"model_name": "fastwam_tiny", "dataset_path": "/data",
                                   "pretrained_checkpoint": str(folder / "model.safetensors")},
                         model={**GOLDEN_MODEL, "video_attention_mask_mode": "bidirectional"}, data=DATA)
    validate_run_config(agreed, world_size=1)


def test_the_loader_checks_the_lerobot_config_too(tmp_path):
    from embodied_models.fastwam.modeling import build_model

    folder = _lerobot_folder(tmp_path, **{"action_scheduler.num_train_timesteps": 500,
                                          "video_scheduler.num_train_timesteps": 500})
    cfg = load_config(training={"model_name": "fastwam_tiny"}, model=GOLDEN_MODEL, data=DATA)
    model = build_model(cfg.model, cfg.data)
    with pytest.raises(ConfigError, match=r"model\.num_train_timesteps=500 \(checkpoint\) vs 1000"):
        model.load_pretrained_checkpoint(folder / "model.safetensors")
    (folder / "config.json").unlink()
    assert model.load_pretrained_checkpoint(folder / "model.safetensors").ok
