"""xvla / xvla_tiny on CPU: full-size parameter count on the meta device, gradients, LoRA targets, FSDP units,
gradient checkpointing, bf16 autocast, and the checkpoint layouts (lerobot native and vendored Florence-2, the
2toINF X-VLA layout, tied embeddings, strict errors)."""

from __future__ import annotations

import fnmatch
import re

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from embodied_core.config.resolve import load_config
from embodied_core.errors import CheckpointError
from embodied_data.formats.dummy import DummyDataset
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig
from embodied_models.xvla.modeling import XvlaModel, build_model
from embodied_models.xvla.transforms import make_transforms
from tests.models.test_xvla_golden import FIXTURE, _configs
from tests.support import FIXTURES_DIR

OFFICIAL_PARAMS = 0.88e9
"""X-VLA-0.9B as the issue states it (Florence-2-large encoder + 1024 x 24 transformer)."""


CAMERAS = ["observation.images.front", "observation.images.wrist"]


def _tiny(cameras: list[str] = CAMERAS, **model):
    config = load_config("xvla_tiny", training={"dataset_format": "dummy_datasets"}, model=model,
                         data={"camera_keys": cameras})
    return config.model, config.data


def _batch(model_cfg, data_cfg, size: int = 3):
    dataset = DummyDataset(data_cfg, num_samples=8)
    transforms = make_transforms(model_cfg, data_cfg, stats=dataset.stats)
    return transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(size)])


def test_full_size_parameter_count_on_meta_device():
    data = XvlaDataConfig(camera_keys=["a", "b", "c"], state_dim=20, action_dim=20)
    with torch.device("meta"):
        model = XvlaModel(XvlaModelConfig(), data)
    total = sum(p.numel() for p in model.parameters())
    vlm = sum(p.numel() for p in model.vlm.parameters())
    print(f"xvla full size: {total / 1e9:.4f} B parameters (VLM {vlm / 1e6:.1f} M, transformer "
          f"{(total - vlm) / 1e6:.1f} M)")
    assert abs(total - OFFICIAL_PARAMS) / OFFICIAL_PARAMS < 0.005
    assert all(p.is_meta for p in model.parameters())
    model_cfg, data_cfg = _tiny()
    tiny = sum(p.numel() for p in build_model(model_cfg, data_cfg).parameters())
    print(f"xvla_tiny: {tiny} parameters")
    assert tiny < 200_000


def test_every_trainable_parameter_gets_a_gradient():
    model_cfg, data_cfg = _tiny()
    torch.manual_seed(0)
    model = build_model(model_cfg, data_cfg).train()
    out = model(_batch(model_cfg, data_cfg))
    assert out.loss.ndim == 0 and set(out.metrics) == {"joints_loss"}
    out.loss.backward()
    without = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.any())]
    assert without == []
    # one view: no auxiliary tokens, so their projection is frozen (it stays in the checkpoint)
    model_cfg, data_cfg = _tiny(CAMERAS[:1])
    model = build_model(model_cfg, data_cfg)
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen == ["transformer.aux_visual_proj.weight", "transformer.aux_visual_proj.bias"]
    model(_batch(model_cfg, data_cfg)).loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_lora_targets_are_exactly_the_linear_layers():
    model_cfg, data_cfg = _tiny()
    model = build_model(model_cfg, data_cfg)
    modules = dict(model.named_modules())
    patterns = model.default_lora_targets()
    for pattern in patterns:
        assert fnmatch.filter(modules, pattern), f"{pattern} matches no module"
    targeted = {name for name in modules if any(fnmatch.fnmatchcase(name, p) for p in patterns)}
    linear = {name for name, module in modules.items() if isinstance(module, nn.Linear)}
    assert targeted == linear


def test_fsdp_units_and_weight_decay_exemptions_exist():
    model_cfg, data_cfg = _tiny()
    model = build_model(model_cfg, data_cfg)
    kinds = {type(m) for m in model.modules()}
    assert set(model.fsdp_units()) <= kinds and len(model.fsdp_units()) == 3
    names = dict(model.named_parameters())
    exempt = model.no_weight_decay()
    assert exempt <= set(names)
    assert {"transformer.pos_emb", "transformer.soft_prompt_hub.weight", "vlm.language_model.shared.weight",
            "transformer.action_encoder.bias.weight"} <= exempt
    assert "transformer.action_encoder.fc.weight" not in exempt


def test_compile_gives_the_davit_stages_static_shapes():
    """Each DaViT stage runs its own fixed shape; under automatic dynamic shapes inductor fails on them (torch 2.13:
    "cannot determine truth value of Relational"), so --compile compiles them with static shapes, and only them."""
    from embodied_core.trainer.compile import compile_blocks

    model = build_model(*_tiny())
    report = compile_blocks(model)
    davit = [n for n, m in model.named_modules() if type(m).__name__ == "Florence2VisionBlock"]
    assert davit and report.static_blocks == tuple(davit)
    assert any(".layers." in n for n in report.blocks if n not in davit)  # BART / transformer blocks stay dynamic


def test_absent_views_skip_the_tower_eager_and_keep_the_compiled_shape():
    """Eager, only the present views run through DaViT (the work lerobot does); once the blocks are compiled every
    view runs at the one fixed shape and the absent ones are zeroed. Features and gradients agree."""
    from embodied_core.trainer.compile import compile_blocks

    model_cfg, data_cfg = _tiny(dropout=0.0, text_dropout=0.0, vision_drop_path_rate=0.0)
    torch.manual_seed(0)
    model = build_model(model_cfg, data_cfg).eval()
    pixels = model.pixel_values(_batch(model_cfg, data_cfg)).flatten(0, 1)  # [3 * 2 views, 3, H, W]
    present = torch.tensor([True, False, True, True, False, True])
    seen: list[int] = []
    model.vlm.vision_tower.register_forward_pre_hook(lambda _, args: seen.append(args[0].shape[0]))
    results = []
    for static in (False, True):
        model.zero_grad()
        model.vlm.static_view_batch = lambda static=static: static
        feats = model.vlm.view_features(pixels, present)
        (feats * torch.linspace(-1, 1, feats.shape[-1])).sum().backward()
        results.append((feats.detach(), {n: p.grad.clone() for n, p in model.vlm.named_parameters()
                                         if p.grad is not None}))
    assert seen == [4, 6]
    (eager, eager_grads), (static, static_grads) = results
    assert not eager[~present].any() and not static[~present].any() and eager[present].abs().sum() > 0
    torch.testing.assert_close(eager, static, atol=1e-6, rtol=1e-5)
    assert eager_grads.keys() == static_grads.keys() and eager_grads
    for name, grad in eager_grads.items():
        torch.testing.assert_close(grad, static_grads[name], atol=1e-6, rtol=1e-5, msg=name)
    seen.clear()
    model.vlm.view_features(pixels, torch.ones(6, dtype=torch.bool))  # nothing to skip: one call on all views
    assert seen == [6]
    del model.vlm.static_view_batch
    assert not model.vlm.static_view_batch()
    compile_blocks(model)  # lazy: marks the blocks, compiles on their first call (not made here)
    assert model.vlm.static_view_batch()


def test_gradient_checkpointing_gives_the_same_gradients():
    grads = []
    for checkpointing in (False, True):
        model_cfg, data_cfg = _tiny(gradient_checkpointing=checkpointing, dropout=0.0, text_dropout=0.0,
                                    vision_drop_path_rate=0.0)
        torch.manual_seed(0)
        model = build_model(model_cfg, data_cfg).train()
        batch = _batch(model_cfg, data_cfg)
        torch.manual_seed(1)
        model(batch).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-6, rtol=1e-5, msg=name)


def test_bf16_autocast_forward_backward():
    model_cfg, data_cfg = _tiny()
    model = build_model(model_cfg, data_cfg).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(_batch(model_cfg, data_cfg))
    out.loss.float().backward()
    assert torch.isfinite(out.loss)
    assert model.transformer.action_encoder.fc.weight.grad is not None


# ------------------------------------------------------------------ checkpoint layouts
_BLOCK = re.compile(r"vlm\.vision_tower\.blocks\.(\d+)\.(\d+)\.(spatial_block|channel_block)\.(.+)")


def _to_vendored(key: str, tensor: torch.Tensor) -> tuple[str, torch.Tensor]:
    """Our (lerobot-native) name -> the Microsoft remote-code Florence-2 name used by 2toINF checkpoints."""
    if key == "vlm.multi_modal_projector.image_projection.weight":
        return "vlm.image_projection", tensor.t().contiguous()
    if m := re.fullmatch(r"vlm\.vision_tower\.convs\.(\d+)\.conv\.(.+)", key):
        return f"vlm.vision_tower.convs.{m[1]}.proj.{m[2]}", tensor
    if m := _BLOCK.fullmatch(key):
        head = f"vlm.vision_tower.blocks.{m[1]}.{m[2]}.{m[3]}."
        attn = "window_attn" if m[3] == "spatial_block" else "channel_attn"
        rest = m[4]
        for ours, theirs in ((r"conv([12])\.(.+)", r"conv\1.fn.dw.\2"), (r"norm1\.(.+)", attn + r".norm.\1"),
                             (attn + r"\.(.+)", attn + r".fn.\1"), (r"norm2\.(.+)", r"ffn.norm.\1"),
                             (r"ffn\.(.+)", r"ffn.fn.net.\1")):
            if re.fullmatch(ours, rest):
                return head + re.sub(ours, theirs, rest), tensor
        raise AssertionError(key)
    for ours, theirs in (("vlm.multi_modal_projector.image_position_embed.", "vlm.image_pos_embed."),
                         ("vlm.multi_modal_projector.visual_temporal_embed.", "vlm.visual_temporal_embed."),
                         ("vlm.multi_modal_projector.image_proj_norm.", "vlm.image_proj_norm."),
                         ("vlm.language_model.", "vlm.language_model.model.")):
        if key.startswith(ours):
            return theirs + key[len(ours):], tensor
    return key, tensor


@pytest.fixture(scope="module")
def native() -> dict[str, torch.Tensor]:
    assert FIXTURE.is_dir(), f"{FIXTURES_DIR} missing"
    return load_file(FIXTURE / "model.safetensors")


def _fresh(mode: str = "ee6d", real_dim: int = 20) -> XvlaModel:
    torch.manual_seed(5)
    return XvlaModel(*_configs(mode, real_dim))


def test_vendored_2toinf_layout_loads_to_the_same_weights(native, tmp_path):
    vendored = dict(_to_vendored(k, v) for k, v in native.items())
    assert "vlm.image_projection" in vendored and "vlm.language_model.model.shared.weight" in vendored
    del vendored["vlm.language_model.model.encoder.embed_tokens.weight"]  # safetensors keeps one tied name
    vendored["vlm.language_model.final_logits_bias"] = torch.zeros(1, 96)
    save_file(vendored, tmp_path / "model.safetensors")
    reference = _fresh()
    reference.load_pretrained_checkpoint(FIXTURE / "model.safetensors")
    model = _fresh()
    report = model.load_pretrained_checkpoint(tmp_path / "model.safetensors")
    assert report.ok and report.ignored == ["vlm.language_model.final_logits_bias"]
    assert report.tied == ["vlm.language_model.shared.weight -> vlm.language_model.encoder.embed_tokens.weight"]
    for name, tensor in reference.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name


def test_lerobot_pretrained_model_folder_with_model_prefix(native, tmp_path):
    """lerobot saves ``model.``-prefixed keys under pretrained_model/ (old releases: the vendored layout)."""
    folder = tmp_path / "run" / "pretrained_model"
    folder.mkdir(parents=True)
    state = {f"model.{k}": v for k, v in (_to_vendored(k, v) for k, v in native.items())}
    del state["model.vlm.language_model.model.shared.weight"]
    save_file(state, folder / "model.safetensors")
    model = _fresh()
    report = model.load_pretrained_checkpoint(tmp_path / "run")
    assert report.ok and report.tied == [
        "vlm.language_model.encoder.embed_tokens.weight -> vlm.language_model.shared.weight"]
    assert torch.equal(model.vlm.language_model.shared.weight, native["vlm.language_model.shared.weight"])


def test_strict_errors_name_the_keys(native):
    with pytest.raises(CheckpointError, match=r"unexpected: transformer\.extra_head\.weight"):
        _fresh().load_pretrained_checkpoint({**native, "transformer.extra_head.weight": torch.zeros(2)})
    # a joint (14-wide) model cannot take ee6d (20-wide) action layers
    with pytest.raises(CheckpointError, match=r"shape mismatch: transformer\.action_encoder\.fc\.weight"):
        _fresh("joint", 14).load_pretrained_checkpoint(native)
    both = {k: v for k, v in native.items() if "shared" not in k and "embed_tokens" not in k}
    with pytest.raises(CheckpointError, match=r"vlm\.language_model\.shared\.weight / "
                                              r"vlm\.language_model\.encoder\.embed_tokens\.weight"):
        _fresh().load_pretrained_checkpoint(both)
    report = _fresh().load_pretrained_checkpoint(both, allow_missing=["vlm.language_model.*"])
    assert set(report.missing) == {"vlm.language_model.shared.weight",
                                   "vlm.language_model.encoder.embed_tokens.weight"}
