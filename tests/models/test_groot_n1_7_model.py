"""GR00T N1.7 model: official parameter count on the meta device, freezing, gradients, keyed training draws,
sampling, gradient checkpointing, bf16 autocast, declared FSDP units and LoRA targets."""

from __future__ import annotations

import fnmatch

import attrs
import pytest
import torch
from torch import nn
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLForConditionalGeneration

from embodied_core.config.resolve import load_config
from embodied_data.formats.dummy import DummyDataset
from embodied_models.groot_n1_7.backbone import qwen3vl_configs
from embodied_models.groot_n1_7.modeling import GrootN17Model, build_model
from embodied_models.groot_n1_7.transforms import make_transforms

DATA = {"state_dim": 6, "action_dim": 5, "camera_keys": ["observation.images.front", "observation.images.wrist"]}


def _configs(name: str = "groot_n1_7_tiny", **model):
    config = load_config(name, training={"dataset_format": "dummy_datasets", "tokenizer_path": "unused"},
                         model=model, data=DATA)
    return config.model, config.data


def _batch(model_cfg, data_cfg, size: int = 3):
    dataset = DummyDataset(data_cfg, num_samples=8)
    transforms = make_transforms(model_cfg, data_cfg, stats=dataset.stats)
    return transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(size)])


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_full_size_parameter_count_matches_the_official_checkpoint():
    model_cfg, data_cfg = _configs("groot_n1_7")
    with torch.device("meta"):
        model = build_model(model_cfg, data_cfg)
        # the official backbone module: transformers' Qwen3-VL with 16 language layers, LM head stored untied
        text, vision = qwen3vl_configs(model_cfg)
        official_backbone = Qwen3VLForConditionalGeneration(Qwen3VLConfig(
            text_config=text.to_dict(), vision_config=vision.to_dict(), tie_word_embeddings=False))
    head = model.action_head
    assert _count(head.model) == pytest.approx(1.09e9, rel=0.01)
    assert _count(head.vl_self_attention) == pytest.approx(0.20e9, rel=0.01)
    assert _count(head.state_encoder) + _count(head.action_encoder) + _count(head.action_decoder) == \
        pytest.approx(0.33e9, rel=0.02)
    # ours drops the two tensors GR00T never reads (the checkpoint key map declares them): the final RMSNorm and
    # the LM head; with them the count is the official one
    dropped = model_cfg.llm_width + model_cfg.vocab_size * model_cfg.llm_width
    assert _count(model.backbone) + dropped == _count(official_backbone)
    assert _count(official_backbone) == pytest.approx(1.84e9, rel=0.005)
    total = _count(model) + dropped
    assert total == pytest.approx(3.45e9, rel=0.005)
    assert _count(model) == 3_144_013_952 and total == 3_455_180_928


def test_tiny_preset_is_small_and_backbone_is_frozen_by_default():
    model_cfg, data_cfg = _configs()
    model = build_model(model_cfg, data_cfg)
    assert _count(model) < 1_000_000
    assert not any(p.requires_grad for p in model.backbone.parameters())
    assert all(p.requires_grad for p in model.action_head.parameters())
    model.train()
    assert not model.backbone.layers.training and not model.backbone.visual.training and model.action_head.training
    tuned = build_model(*_configs(tune_llm=True, tune_visual=True))
    assert all(p.requires_grad for p in tuned.parameters())


def test_every_trainable_parameter_gets_a_gradient():
    model_cfg, data_cfg = _configs(tune_llm=True, tune_visual=True)
    torch.manual_seed(0)
    model = build_model(model_cfg, data_cfg).train()
    out = model(_batch(model_cfg, data_cfg))
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    out.loss.backward()
    assert [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()] == []


def test_training_draws_are_keyed_per_sample_not_per_rank():
    """Two ranks with half the batch each draw exactly what one process draws for the whole batch."""
    model_cfg, data_cfg = _configs()
    model = build_model(model_cfg, data_cfg).train()
    batch = _batch(model_cfg, data_cfg, size=4)
    batch.sample_index = torch.tensor([3, 9, 1, 4])
    model.seed_rng(7)
    whole = model.draw(batch)
    halves = []
    for rank, rows in enumerate(([0, 2], [1, 3])):
        model.seed_rng(7, rank=rank)
        halves.append(model.draw(attrs.evolve(batch, input_ids=batch.input_ids[rows],
                                              sample_index=batch.sample_index[rows])))
    for rows, half in zip(([0, 2], [1, 3]), halves, strict=True):
        assert torch.equal(whole.noise[rows], half.noise) and torch.equal(whole.t[rows], half.t)
        assert torch.equal(whole.drop_state[rows], half.drop_state)
    assert ((whole.t >= 0) & (whole.t < model_cfg.noise_s)).all()
    # the stream moves on and its state restores it; eval mode never drops the state
    state = model.rng_state()
    again = model.draw(batch)
    assert not torch.equal(again.noise, whole.noise)
    model.set_rng_state(state)
    assert torch.equal(model.draw(batch).noise, again.noise)
    model.eval()
    assert not model.draw(batch).drop_state.any()


def test_state_dropout_rate_follows_the_config():
    model_cfg, data_cfg = _configs(state_dropout_prob=0.5)
    model = build_model(model_cfg, data_cfg).train()
    batch = _batch(model_cfg, data_cfg, size=1)
    drops = [bool(model.draw(attrs.evolve(batch, sample_index=torch.tensor([i]))).drop_state[0]) for i in range(400)]
    assert 0.4 < sum(drops) / len(drops) < 0.6


def test_loss_is_the_masked_mean_and_sampling_is_deterministic():
    model_cfg, data_cfg = _configs()
    torch.manual_seed(0)
    model: GrootN17Model = build_model(model_cfg, data_cfg).eval()
    batch = _batch(model_cfg, data_cfg)
    model.seed_rng(1)
    out = model.training_terms(batch, model.draw(batch))
    assert not out["action_loss"][batch.action_mask == 0].any()
    assert batch.action_mask.sum() == 3 * data_cfg.action_horizon * data_cfg.action_dim
    squared = (out["pred_velocity"] - out["velocity_target"]) ** 2
    expected = (squared * batch.action_mask).sum() / (batch.action_mask.sum() + 1e-6)
    torch.testing.assert_close(out["loss"], expected)
    noise = torch.randn(3, model_cfg.action_horizon, model_cfg.max_action_dim)
    first = model.sample_actions(batch, noise=noise)
    assert first.shape == (3, model_cfg.action_horizon, model_cfg.max_action_dim)
    assert torch.equal(model.sample_actions(batch, noise=noise), first)
    assert not torch.equal(model.sample_actions(batch, noise=noise, num_steps=2), first)


def test_gradient_checkpointing_gives_the_same_gradients():
    grads = []
    for checkpointing in (False, True):
        model_cfg, data_cfg = _configs(gradient_checkpointing=checkpointing, tune_llm=True, dropout=0.0)
        torch.manual_seed(0)
        model = build_model(model_cfg, data_cfg).train()
        model.seed_rng(3)
        model(_batch(model_cfg, data_cfg)).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-6, rtol=1e-5, msg=name)


def test_bf16_autocast_forward_backward():
    model_cfg, data_cfg = _configs()
    model = build_model(model_cfg, data_cfg).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(_batch(model_cfg, data_cfg))
    out.loss.float().backward()
    assert torch.isfinite(out.loss) and model.action_head.action_encoder.W1.W.grad is not None


def test_declared_fsdp_units_lora_targets_and_weight_decay_exemptions():
    model_cfg, data_cfg = _configs(tune_llm=True)
    model = build_model(model_cfg, data_cfg)
    kinds = {type(m) for m in model.modules()}
    assert set(model.fsdp_units()) <= kinds and len(model.fsdp_units()) == 3
    names = {n: m for n, m in model.named_modules()}
    for pattern in model.default_lora_targets():
        hits = [m for n, m in names.items() if fnmatch.fnmatchcase(n, pattern)]
        assert hits and all(isinstance(m, nn.Linear) for m in hits), pattern
    assert not any("backbone" in p for p in build_model(*_configs()).default_lora_targets())
    exempt = model.no_weight_decay()
    assert "action_head.state_encoder.layer1.b" in exempt and "action_head.state_encoder.layer1.W" not in exempt
