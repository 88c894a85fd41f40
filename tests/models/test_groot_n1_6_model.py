"""GR00T N1.6 model: the official parameter count on the meta device, LoongForge's trainability switches, gradients,
the masked loss and deterministic sampling, gradient checkpointing, bf16 autocast, declared FSDP units, LoRA targets
and weight-decay exemptions."""

from __future__ import annotations

import fnmatch

import attrs
import pytest
import torch
from torch import nn
from transformers import Qwen3ForCausalLM, Siglip2VisionConfig, Siglip2VisionModel

from embodied_core.config.resolve import load_config
from embodied_data.formats.dummy import DummyDataset
from embodied_models.groot_n1_6.backbone import qwen3_config
from embodied_models.groot_n1_6.modeling import GrootN16Model, build_model
from embodied_models.groot_n1_6.transforms import make_transforms

DATA = {"state_dim": 6, "action_dim": 5, "camera_keys": ["observation.images.front", "observation.images.wrist"]}


def _configs(name: str = "groot_n1_6_tiny", **model):
    config = load_config(name, training={"dataset_format": "dummy_datasets", "tokenizer_path": "unused"},
                         model=model, data=DATA)
    return config.model, config.data


def _batch(model_cfg, data_cfg, size: int = 3):
    dataset = DummyDataset(data_cfg, num_samples=8)
    transforms = make_transforms(model_cfg, data_cfg, stats=dataset.stats)
    return transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(size)])


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_full_size_parameter_count_matches_the_official_module():
    """The official module recounted from the released configs: transformers' SigLIP2 tower (with the attention
    pooling head Eagle builds and never reads), the projector, Qwen3 at 16 layers with the tied LM head, the head.
    Ours builds the pooling head too (model.vision_pooling_head, default true); switched off it is 15,238,352 less."""
    model_cfg, data_cfg = _configs("groot_n1_6")
    with torch.device("meta"):
        model = build_model(model_cfg, data_cfg)
        without = build_model(attrs.evolve(model_cfg, vision_pooling_head=False), data_cfg)
        text = qwen3_config(model_cfg)
        text.tie_word_embeddings = True  # Eagle-Block2A-2B-v2's text_config
        llm = Qwen3ForCausalLM(text)
        tower = Siglip2VisionModel(Siglip2VisionConfig(
            hidden_size=model_cfg.vision_width, intermediate_size=model_cfg.vision_mlp_dim,
            num_hidden_layers=model_cfg.vision_depth, num_attention_heads=model_cfg.vision_num_heads,
            num_patches=model_cfg.vision_num_patches, patch_size=model_cfg.vision_patch_size))
    head, backbone = model.action_head, model.backbone
    pooling = sum(p.numel() for n, p in tower.named_parameters() if n.startswith("head."))
    assert pooling == _count(backbone.vision.head) == 15_238_352
    assert _count(backbone.vision) == _count(tower)
    assert _count(backbone.embed_tokens) + _count(backbone.layers) + _count(backbone.norm) == _count(llm)
    official = _count(tower) + _count(backbone.projector) + _count(llm) + _count(head)
    assert _count(model) == official == 2_975_968_192
    assert without.backbone.vision.head is None and _count(without) == official - pooling == 2_960_729_840
    assert _count(head.model) == 1_091_722_240 and _count(head) == 1_418_624_000


def test_the_pooling_head_is_always_frozen_and_never_read():
    """SigLIP2's pooling head: frozen and in eval mode with model.tune_visual=true (no unused trainable parameters
    for DDP / FSDP), and the forward does not read it (its weights do not change the loss)."""
    model_cfg, data_cfg = _configs(tune_llm=True, tune_visual=True, dropout=0.0)
    torch.manual_seed(0)
    model = build_model(model_cfg, data_cfg).train()
    pooling = model.backbone.vision.head
    assert not any(p.requires_grad for p in pooling.parameters()) and not pooling.training
    assert all(p.requires_grad for n, p in model.named_parameters() if not n.startswith("backbone.vision.head."))
    model.backbone.set_trainable(tune_llm=True, tune_visual=True, tune_top_llm_layers=1)
    assert not any(p.requires_grad for p in pooling.parameters())
    batch = _batch(model_cfg, data_cfg)
    model.seed_rng(2)
    draws = model.draw(batch)
    before = model.training_terms(batch, draws)["loss"]
    with torch.no_grad():
        for p in pooling.parameters():
            p.add_(1.0)
    torch.testing.assert_close(model.training_terms(batch, draws)["loss"], before, atol=0.0, rtol=0.0)
    without = build_model(*_configs(vision_pooling_head=False))
    assert without.backbone.vision.head is None
    assert not any(n.startswith("backbone.vision.head.") for n in without.state_dict())


def test_tiny_preset_freezes_the_backbone_but_its_top_layer():
    model_cfg, data_cfg = _configs()
    model = build_model(model_cfg, data_cfg)
    assert _count(model) < 1_000_000
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert {n for n in trainable if n.startswith("backbone.")} == {
        n for n, _ in model.named_parameters() if n.startswith("backbone.layers.1.")}  # tune_top_llm_layers=1
    assert all(p.requires_grad for p in model.action_head.parameters())
    model.train()
    assert not model.backbone.layers.training and not model.backbone.vision.training and model.action_head.training
    everything = build_model(*_configs(tune_llm=True, tune_visual=True))
    assert all(p.requires_grad != n.startswith("backbone.vision.head.") for n, p in everything.named_parameters())
    head_only = build_model(*_configs(tune_top_llm_layers=0, tune_projector=False, tune_vlln=False))
    assert {n for n, p in head_only.named_parameters() if p.requires_grad} == {
        n for n, _ in head_only.named_parameters() if n.startswith("action_head.model.")}
    head_only.train()
    assert not head_only.action_head.state_encoder.training and head_only.action_head.model.training


def test_every_trainable_parameter_gets_a_gradient():
    model_cfg, data_cfg = _configs(tune_llm=True, tune_visual=True)
    torch.manual_seed(0)
    model = build_model(model_cfg, data_cfg).train()
    out = model(_batch(model_cfg, data_cfg))
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    out.loss.backward()
    assert [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())] == []
    assert all(p.grad is None for p in model.backbone.vision.head.parameters())  # frozen, never read


def test_loss_is_the_masked_mean_and_sampling_is_deterministic():
    model_cfg, data_cfg = _configs()
    torch.manual_seed(0)
    model: GrootN16Model = build_model(model_cfg, data_cfg).eval()
    batch = _batch(model_cfg, data_cfg)
    model.seed_rng(1)
    draws = model.draw(batch)
    assert not draws.drop_state.any() and ((draws.t >= 0) & (draws.t < model_cfg.noise_s)).all()
    out = model.training_terms(batch, draws)
    assert not out["action_loss"][batch.action_mask == 0].any()
    assert batch.action_mask.sum() == 3 * data_cfg.action_horizon * data_cfg.action_dim
    squared = (out["pred_velocity"] - out["velocity_target"]) ** 2
    torch.testing.assert_close(out["loss"], (squared * batch.action_mask).sum() / (batch.action_mask.sum() + 1e-6))
    noise = torch.randn(3, model_cfg.action_horizon, model_cfg.max_action_dim)
    first = model.sample_actions(batch, noise=noise)
    assert first.shape == (3, model_cfg.action_horizon, model_cfg.max_action_dim)
    assert torch.equal(model.sample_actions(batch, noise=noise), first)
    assert not torch.equal(model.sample_actions(batch, noise=noise, num_steps=2), first)


def test_gradient_checkpointing_gives_the_same_gradients():
    grads = []
    for checkpointing in (False, True):
        model_cfg, data_cfg = _configs(gradient_checkpointing=checkpointing, tune_llm=True, tune_visual=True,
                                       dropout=0.0)
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
    model_cfg, data_cfg = _configs(tune_visual=True)
    model = build_model(model_cfg, data_cfg)
    kinds = {type(m) for m in model.modules()}
    assert set(model.fsdp_units()) <= kinds and len(model.fsdp_units()) == 3
    names = {n: m for n, m in model.named_modules()}
    for pattern in model.default_lora_targets():
        hits = [m for n, m in names.items() if fnmatch.fnmatchcase(n, pattern)]
        assert hits and all(isinstance(m, nn.Linear) for m in hits), pattern
    default = build_model(*_configs()).default_lora_targets()
    assert "backbone.layers.1.self_attn.q_proj" in default and "backbone.layers.0.self_attn.q_proj" not in default
    assert not any("vision" in p for p in default)
    exempt = model.no_weight_decay()
    assert "action_head.state_encoder.layer1.b" in exempt and "action_head.state_encoder.layer1.W" not in exempt


@pytest.mark.parametrize(("change", "message"), [
    ({"dit_head_dim": 10}, "must equal model.input_embedding_dim"),
    ({"vision_num_patches": 15}, "must be a square number"),
    ({"vision_full_attention_layers": [5]}, "are not vision layers"),
    ({"tune_top_llm_layers": 3}, "exceeds model.select_layer 2"),
    ({"vision_num_heads": 16}, "multiple of 4 for the 2-D RoPE"),
])
def test_sizes_the_model_cannot_run_are_named(change, message):
    model_cfg, data_cfg = _configs()
    model_cfg = attrs.evolve(model_cfg, **change)
    assert any(message in p for p in model_cfg.validate())
    with pytest.raises(ValueError, match=message):
        build_model(model_cfg, data_cfg)
