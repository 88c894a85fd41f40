"""smolvla_tiny on CPU: KV-cache sampling equals the joint forward (both attention modes, fewer expert layers,
image special tokens), every trainable parameter gets a gradient, gradient checkpointing, bf16 autocast, padded
steps out of the loss."""

from __future__ import annotations

import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_data.formats.dummy import DummyDataset
from embodied_models.smolvla.modeling import SmolVLAModel, build_model
from embodied_models.smolvla.transforms import make_transforms
from tests.models.test_smolvla_golden import one_thread  # noqa: F401 - autouse fixture

CAMERAS = ["observation.images.front", "observation.images.wrist"]


def _tiny(**model):
    config = load_config("smolvla_tiny", training={"dataset_format": "dummy_datasets"}, model=model,
                         data={"camera_keys": CAMERAS})
    return config.model, config.data


def _batch(model_cfg, data_cfg, size: int = 3):
    dataset = DummyDataset(data_cfg, num_samples=8)
    transforms = make_transforms(model_cfg, data_cfg, stats=dataset.stats)
    batch = transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(size)])
    batch.token_mask[1, 5:] = False  # a shorter task in the batch
    batch.image_masks[2, 1] = False  # and a missing camera
    return batch


@pytest.mark.parametrize("variant", [
    {},
    {"attention_mode": "self_attn"},
    {"num_expert_layers": 2},
    {"add_image_special_tokens": True},
])
def test_cached_sampling_equals_the_joint_forward(variant):
    model_cfg, data_cfg = _tiny(attn_implementation="eager", **variant)
    torch.manual_seed(0)
    model: SmolVLAModel = build_model(model_cfg, data_cfg).eval()
    batch = _batch(model_cfg, data_cfg)
    x_t = torch.randn(3, data_cfg.action_horizon, model_cfg.max_action_dim)
    time = torch.tensor([0.9, 0.5, 0.1])
    with torch.no_grad():
        joint = model.velocity(model.embed_prefix(batch), x_t, time)
        cache, pad = model.fill_prefix_cache(batch)
        cached = model.cached_velocity(cache, pad, x_t, time)
        sampled = model.sample_actions(batch, noise=x_t, num_steps=2)
        x = x_t + -0.5 * model.velocity(model.embed_prefix(batch), x_t, torch.ones(3))
        x = x + -0.5 * model.velocity(model.embed_prefix(batch), x, torch.full((3,), 0.5))
    torch.testing.assert_close(cached, joint, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(sampled, x, atol=2e-5, rtol=1e-5)
    if variant.get("add_image_special_tokens"):
        tokens_per_camera = (data_cfg.image_size[0] // model_cfg.vision_patch_size // model_cfg.scale_factor) ** 2
        assert pad.shape[1] == 2 * (tokens_per_camera + 3) + model_cfg.tokenizer_max_length + 1


def test_every_trainable_parameter_gets_a_gradient():
    model_cfg, data_cfg = _tiny(train_expert_only=False, freeze_vision_encoder=False)
    torch.manual_seed(0)
    model = build_model(model_cfg, data_cfg).train()
    out = model(_batch(model_cfg, data_cfg))
    assert out.loss.ndim == 0
    out.loss.backward()
    without = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())]
    assert without == []
    # the frozen ones are exactly those the loss cannot reach: unfrozen, they still get no gradient
    frozen = [p for p in model.parameters() if not p.requires_grad]
    for param in frozen:
        param.requires_grad_(True)
    model.zero_grad()
    model(_batch(model_cfg, data_cfg)).loss.backward()
    assert all(p.grad is None or not p.grad.any() for p in frozen)


def test_expert_only_training_reaches_the_state_projection_through_the_frozen_vlm():
    model_cfg, data_cfg = _tiny()
    model = build_model(model_cfg, data_cfg).train()
    model(_batch(model_cfg, data_cfg)).loss.backward()
    assert model.state_proj.weight.grad is not None and model.state_proj.weight.grad.any()
    assert all(p.grad is None for n, p in model.named_parameters() if ".vlm." in n or n.startswith("vision_model"))


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
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-6, rtol=1e-5, msg=name)


def test_padded_steps_and_padding_dims_stay_out_of_the_loss():
    model_cfg, data_cfg = _tiny()
    torch.manual_seed(0)
    model = build_model(model_cfg, data_cfg)
    batch = _batch(model_cfg, data_cfg)
    batch.action_is_pad[:, 6:] = True
    noise, time = torch.randn_like(batch.actions), torch.full((3,), 0.5)
    model.sample_noise_and_time = lambda actions: (noise, time)
    with torch.no_grad():
        elements = model.loss_elements(batch, noise=noise, time=time)
        assert torch.allclose(model(batch).loss, elements[:, :6, : data_cfg.action_dim].mean())


def test_bf16_autocast_forward_backward():
    model_cfg, data_cfg = _tiny()
    model = build_model(model_cfg, data_cfg).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(_batch(model_cfg, data_cfg))
    out.loss.float().backward()
    assert torch.isfinite(out.loss)
    assert model.action_in_proj.weight.grad is not None
