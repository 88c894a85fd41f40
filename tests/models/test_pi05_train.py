"""pi05_tiny end to end on CPU: Trainer API on dummy data and on a real LeRobot v3.0 video dataset, gradients,
KV-cache sampling consistency, gradient checkpointing, bf16 autocast."""

from __future__ import annotations

import json
import math

import pytest
import torch

from embodied_core import Trainer
from embodied_core.config.resolve import load_config
from embodied_data.formats.dummy import DummyDataset
from embodied_models.pi05.modeling import Pi05Model, build_model
from embodied_models.pi05.transforms import make_transforms
from tests.support import DATASETS_DIR

LINGZU = DATASETS_DIR / "lingzu_pi05_v30"


def _tiny(**model):
    config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"}, model=model)
    return config.model, config.data


def _batch(model_cfg, data_cfg, size: int = 3):
    dataset = DummyDataset(data_cfg, num_samples=8)
    transforms = make_transforms(model_cfg, data_cfg, stats=dataset.stats)
    return transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(size)])


def test_trainer_api_on_dummy_datasets(tmp_path):
    result = Trainer({"training": {
        "model_name": "pi05_tiny", "dataset_format": "dummy_datasets", "train_iters": 3, "dtype": "float32",
        "per_device_batch_size": 2, "num_workers": 0, "output_dir": str(tmp_path), "save_interval": 0,
        "lr_warmup_iters": 0}}).train()
    assert result.step == 3
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(math.isfinite(r["loss"]) and r["loss"] > 0 and r["grad_norm"] > 0 for r in rows)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_trainer_on_lingzu_video_dataset(tmp_path):
    assert LINGZU.is_dir(), f"{LINGZU} missing"
    result = Trainer({
        "training": {"model_name": "pi05_tiny", "dataset_format": "lerobot_datasets", "dataset_path": str(LINGZU),
                     "split": "3-6,10-12", "train_iters": 2, "dtype": "float32", "per_device_batch_size": 2,
                     "num_workers": 0, "output_dir": str(tmp_path), "save_interval": 2, "lr_warmup_iters": 0},
        # lingzu has 34-dim state/actions under its own key names
        "model": {"max_action_dim": 34, "max_state_dim": 34},
        "data": {"camera_keys": ["image"], "state_key": "state", "action_key": "actions", "state_dim": 34,
                 "action_dim": 34},
    }).train()
    assert result.step == 2
    assert math.isfinite(result.last_metrics["loss"])
    assert result.checkpoint is not None and (result.checkpoint / "model.safetensors").is_file()


def test_every_trainable_parameter_gets_a_gradient():
    model_cfg, data_cfg = _tiny()
    torch.manual_seed(0)
    model = build_model(model_cfg, data_cfg).train()
    out = model(_batch(model_cfg, data_cfg))
    assert out.loss.ndim == 0
    out.loss.backward()
    without = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())]
    # the pad token's embedding row is zero-gradient by design (padding_idx), the rest of the table is not
    assert without == []


def test_cached_sampling_velocity_equals_joint_velocity():
    model_cfg, data_cfg = _tiny(attn_implementation="eager")
    torch.manual_seed(0)
    model: Pi05Model = build_model(model_cfg, data_cfg).eval()
    batch = _batch(model_cfg, data_cfg)
    x_t = torch.randn(3, data_cfg.action_horizon, model_cfg.max_action_dim)
    time = torch.tensor([0.9, 0.5, 0.1])
    with torch.no_grad():
        joint = model.velocity(model.embed_prefix(batch), x_t, time)
        cache, pad = model.fill_prefix_cache(batch)
        cached = model.cached_velocity(cache, pad, x_t, time)
        sampled = model.sample_actions(batch, noise=x_t, num_steps=2)
    torch.testing.assert_close(cached, joint, atol=1e-5, rtol=1e-5)
    assert sampled.shape == (3, data_cfg.action_horizon, model_cfg.max_action_dim)
    # two Euler steps by hand through the joint path
    with torch.no_grad():
        x = x_t + -0.5 * model.velocity(model.embed_prefix(batch), x_t, torch.ones(3))
        x = x + -0.5 * model.velocity(model.embed_prefix(batch), x, torch.full((3,), 0.5))
    torch.testing.assert_close(sampled, x, atol=1e-5, rtol=1e-5)


def test_gradient_checkpointing_gives_the_same_gradients():
    grads = []
    for checkpointing in (False, True):
        model_cfg, data_cfg = _tiny(gradient_checkpointing=checkpointing)
        torch.manual_seed(0)
        model = build_model(model_cfg, data_cfg).train()
        batch = _batch(model_cfg, data_cfg)
        torch.manual_seed(1)
        model(batch).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-6, rtol=1e-5, msg=name)


def test_padded_actions_can_be_masked_out_of_the_loss():
    model_cfg, data_cfg = _tiny(mask_padded_actions=True)
    torch.manual_seed(0)
    model = build_model(model_cfg, data_cfg)
    batch = _batch(model_cfg, data_cfg)
    batch.action_is_pad[:, 5:] = True
    noise = torch.randn_like(batch.actions)
    time = torch.full((3,), 0.5)
    model.sample_noise_and_time = lambda actions: (noise, time)
    with torch.no_grad():
        elements = model.loss_elements(batch, noise=noise, time=time)[:, :5, : data_cfg.action_dim]
        assert torch.allclose(model(batch).loss, elements.mean())


def test_bf16_autocast_forward_backward():
    model_cfg, data_cfg = _tiny()
    model = build_model(model_cfg, data_cfg).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(_batch(model_cfg, data_cfg))
    out.loss.float().backward()
    assert torch.isfinite(out.loss)
    assert model.action_in_proj.weight.grad is not None
