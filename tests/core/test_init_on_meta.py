"""--init-on-meta in one process, for every model (pi05, lingbot_va, the template): the model's own initialization
of what was built on meta (constants, buffers and per-tensor scale as building gives them), streamed pretrained
weights (a safetensors file, LingBot-VA transformer folders in their layouts), and the errors naming what is wrong.
The FSDP cases (local shards, DCP, resume) are in tests/dist/test_init_on_meta.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from embodied_core import EmbodiedModel
from embodied_core.config.resolve import load_config, model_spec
from embodied_core.errors import CheckpointError, PluginError
from embodied_core.trainer.api import Trainer
from embodied_core.trainer.meta_init import build_on_meta, has_meta_tensors, materialize
from embodied_models.lingbot_va.checkpoint import save_transformer_folder
from tests.core.trainer_support import training

MODELS = {"pi05_tiny": {"dataset_format": "dummy_datasets"}, "lingbot_va_tiny": {},
          "tiny_flow_policy": {"dataset_format": "dummy_datasets"}}


def _build(name: str, *, meta: bool, **model: Any) -> nn.Module:
    config = load_config(name, training=MODELS[name], model=model, environ={})
    factory = model_spec(name).load_factory()
    if not meta:
        torch.manual_seed(0)
        return factory(config.model, config.data)
    built = build_on_meta(lambda: factory(config.model, config.data))
    assert has_meta_tensors(built)
    materialize(built, device=torch.device("cpu"), init=built.init_module_weights, seed=0)
    assert not has_meta_tensors(built)
    return built


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_models_own_initialization_matches_building(name: str) -> None:
    built, materialized = _build(name, meta=False), _build(name, meta=True)
    want, got = built.state_dict(), materialized.state_dict()
    assert want.keys() == got.keys()
    for key, value in want.items():
        value, other = value.double(), got[key].double()
        if value.numel() < 16 or value.std() == 0:  # constants (zeros, ones, fixed buffers) are the same values
            torch.testing.assert_close(other, value, msg=key)
        else:  # random draws: other numbers, the same scale
            assert 0.7 < float(other.std() / value.std()) < 1.4, key
    for (key, buffer), (_, other_buffer) in zip(built.named_buffers(), materialized.named_buffers(), strict=True):
        assert torch.equal(buffer, other_buffer), key  # RoPE frequencies, position ids, embedding scale, schedules


def test_a_parameter_the_model_does_not_initialize_is_an_error() -> None:
    class Table(EmbodiedModel):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(2, 2)
            self.table = nn.Parameter(torch.zeros(3))  # no module's reset_parameters covers it

    model = build_on_meta(Table)
    with pytest.raises(PluginError, match=r"param Table\.table \(Table\) was left uninitialized"):
        materialize(model, device=torch.device("cpu"), init=model.init_module_weights, seed=0)


def test_pi05_streams_a_pretrained_file_into_the_model_built_on_meta(tmp_path: Path) -> None:
    source = _build("pi05_tiny", meta=False)
    file = tmp_path / "pi05.safetensors"
    save_file({k: v.contiguous() for k, v in source.state_dict().items()}, str(file))
    trainer = Trainer({"training": training(tmp_path / "run", model_name="pi05_tiny", init_on_meta=True,
                                            pretrained_checkpoint=str(file))}).build()
    try:
        trainer.setup()
        loaded = trainer.strategy.unwrap_model(trainer.model).state_dict()
    finally:
        trainer.close()
    for key, value in source.state_dict().items():
        assert torch.equal(loaded[key], value), key


@pytest.mark.parametrize("layout", ["lingbot_va", "embodied"])
def test_lingbot_va_streams_a_sharded_transformer_folder(tmp_path: Path, layout: str) -> None:
    source = _build("lingbot_va_tiny", meta=False)
    state = source.transformer.state_dict()
    if layout == "embodied":
        state = {f"transformer.{k}": v for k, v in state.items()}
    save_transformer_folder(state, source.transformer.config, tmp_path, max_shard_bytes=20_000)
    target = _build("lingbot_va_tiny", meta=True)
    from embodied_models.lingbot_va.checkpoint import load_pretrained

    # the default layout goes through the model's own load_pretrained_checkpoint (what the trainer calls)
    report = target.load_pretrained_checkpoint(tmp_path) if layout == "lingbot_va" else \
        load_pretrained(target, tmp_path, layout=layout)
    assert report.ok
    for key, value in source.state_dict().items():
        assert torch.equal(target.state_dict()[key], value), key


def test_lingbot_va_converts_a_wan22_folder_while_streaming(tmp_path: Path) -> None:
    from diffusers import WanTransformer3DModel

    from embodied_models.lingbot_va.checkpoint import convert_wan22_state_dict, load_pretrained

    target = _build("lingbot_va_tiny", meta=True)
    cfg = target.transformer.config
    torch.manual_seed(1)
    wan = WanTransformer3DModel(patch_size=tuple(cfg.patch_size), num_attention_heads=cfg.num_attention_heads,
                                attention_head_dim=cfg.attention_head_dim, in_channels=cfg.in_channels,
                                out_channels=cfg.out_channels, text_dim=cfg.text_dim, freq_dim=cfg.freq_dim,
                                ffn_dim=cfg.ffn_dim, num_layers=cfg.num_layers, rope_max_seq_len=64)
    wan.save_pretrained(str(tmp_path / "transformer"), max_shard_size="50KB")
    expected = convert_wan22_state_dict(wan.state_dict(), target.transformer)  # the whole-dict conversion
    report = load_pretrained(target, tmp_path, layout="wan22")
    assert report.missing == ["transformer.action_embedder.bias", "transformer.action_embedder.weight"]  # kept
    assert not report.unexpected and not report.mismatched
    for key, value in expected.items():
        assert torch.equal(target.transformer.state_dict()[key], value), key


def test_weights_loaded_while_building_on_meta_are_an_error_naming_the_fix(tmp_path: Path) -> None:
    source = _build("lingbot_va_tiny", meta=False)
    save_transformer_folder(source.transformer.state_dict(), source.transformer.config, tmp_path)
    config = load_config("lingbot_va_tiny", model={"pretrained_path": str(tmp_path / "transformer")}, environ={})
    factory = model_spec("lingbot_va_tiny").load_factory()
    with pytest.raises(CheckpointError, match=r"--init-on-meta.*through --pretrained-checkpoint instead"):
        build_on_meta(lambda: factory(config.model, config.data))


def test_init_on_meta_with_lora_under_fsdp_is_refused_before_anything_is_built(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    from embodied_core.trainer.checks import check_trainer_flags

    monkeypatch.setenv("WORLD_SIZE", "2")
    config = load_config("tiny_flow_policy", training=training(tmp_path, init_on_meta=True, use_lora=True,
                                                               lora_target_modules="head.0"), environ={})
    assert any("--init-on-meta with --use-lora under FSDP" in p for p in check_trainer_flags(config))
