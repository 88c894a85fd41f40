"""Activation checkpointing (--activation-checkpoint-module-patterns / --activation-checkpoint-skip-modules and the
models' own gradient_checkpointing fields): float32 gradients equal with and without, the layers really recompute,
names and classes unchanged, bad patterns reported. The FSDP case is in tests/dist/test_large_model_flags.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from embodied_core.config.resolve import load_config
from embodied_core.errors import ConfigError
from embodied_core.trainer.activation_checkpoint import apply_activation_checkpointing, is_checkpointed
from embodied_core.trainer.api import Trainer
from embodied_models.lingbot_va.modeling import build_model as build_lingbot
from tests.core.trainer_support import training


def _pi05_step(out: Path, **training_extra: Any) -> tuple[dict[str, torch.Tensor], dict[str, int], Any]:
    """One forward/backward of pi05_tiny on dummy data through the trainer's own setup; returns the gradients,
    how often each joint layer's expert q_proj ran forward, and the unwrapped model."""
    args = training(out, model_name="pi05_tiny", per_device_batch_size=2, **training_extra)
    trainer = Trainer({"training": args}).build()
    try:
        trainer.setup()
        model = trainer.strategy.unwrap_model(trainer.model)
        calls: dict[str, int] = {}
        for name, layer in model.layers.named_children():  # a child: a recomputation calls it again
            count = lambda *_, n=name: calls.__setitem__(n, calls.get(n, 0) + 1)  # noqa: E731
            layer.expert.self_attn.q_proj.register_forward_hook(count)
        batch = next(iter(trainer.loader)).to(trainer.device)
        torch.manual_seed(123)
        trainer.forward_backward(batch, scale=1.0)
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return grads, calls, model
    finally:
        trainer.close()


def _assert_same(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert got.keys() == want.keys()
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_patterns_recompute_the_layers_and_keep_float32_gradients(tmp_path: Path) -> None:
    plain, plain_calls, _ = _pi05_step(tmp_path / "plain")
    grads, calls, model = _pi05_step(tmp_path / "ac", activation_checkpoint_module_patterns="layers.*")
    _assert_same(grads, plain)
    assert set(plain_calls.values()) == {1}
    assert set(calls.values()) == {2}  # forward, then the recomputation in backward
    assert all(is_checkpointed(layer) for layer in model.layers)
    assert type(model.layers[0]).__name__ == "Pi05Layer"  # class and parameter names unchanged
    assert "layers.0.vlm.self_attn.q_proj.weight" in dict(model.named_parameters())


def test_skip_modules_leave_selected_layers_alone(tmp_path: Path) -> None:
    _, calls, model = _pi05_step(tmp_path / "run", activation_checkpoint_module_patterns="layers.*",
                                 activation_checkpoint_skip_modules="layers.1")
    assert calls == {"0": 2, "1": 1}
    assert is_checkpointed(model.layers[0]) and not is_checkpointed(model.layers[1])


def test_the_models_own_field_is_the_same_mechanism_and_can_be_skipped(tmp_path: Path) -> None:
    config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"},
                         model={"gradient_checkpointing": True})
    from embodied_models.pi05.modeling import build_model

    model = build_model(config.model, config.data)
    assert all(is_checkpointed(layer) for layer in model.layers)
    report = apply_activation_checkpointing(model, patterns=None, skip="layers.0")
    assert report.checkpointed == ("layers.1",) and report.skipped == ("layers.0",)
    assert not is_checkpointed(model.layers[0])


def test_lingbot_va_blocks_by_pattern_give_the_same_gradients() -> None:
    config = load_config(training={"model_name": "lingbot_va_tiny"})
    torch.manual_seed(0)
    model = build_lingbot(config.model, config.data)
    cfg, data = model.config, model.data_config
    gen = torch.Generator().manual_seed(0)
    h, w = data.latent_hw()
    mask = torch.zeros(2, cfg.action_dim, data.num_latent_frames, data.action_per_frame, 1)
    mask[:, cfg.used_action_channel_ids] = 1.0
    batch = {"latents": torch.randn(2, cfg.in_channels, data.num_latent_frames, h, w, generator=gen),
             "actions": torch.randn(mask.shape, generator=gen) * mask, "actions_mask": mask.bool(),
             "text_emb": torch.randn(2, cfg.text_len, cfg.text_dim, generator=gen)}
    grads = []
    for patterns in (None, "transformer.blocks.*"):
        apply_activation_checkpointing(model, patterns=patterns, skip=None)
        model.seed_rng(4)
        model(batch).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        model.zero_grad(set_to_none=True)
    assert model.transformer.gradient_checkpointing  # the diffusers-style attribute reads the same state
    _assert_same(grads[1], grads[0])


@pytest.mark.parametrize(("flags", "message"), [
    ({"activation_checkpoint_module_patterns": "layer.*"},
     "--activation-checkpoint-module-patterns: 'layer.*' matches no module in the model"),
    ({"activation_checkpoint_module_patterns": "layers.*", "activation_checkpoint_skip_modules": "vlm_norm"},
     "--activation-checkpoint-skip-modules: 'vlm_norm' matches no module among the modules selected"),
])
def test_a_pattern_matching_nothing_is_an_error(tmp_path: Path, flags: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _pi05_step(tmp_path / "run", **flags)
