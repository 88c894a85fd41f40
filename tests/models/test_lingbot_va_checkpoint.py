"""LingBot-VA checkpoints: diffusers folder round trip, strict report, lerobot key map, Wan2.2 conversion."""

from __future__ import annotations

import json

import pytest
import torch
from diffusers import WanTransformer3DModel

from embodied_core.errors import CheckpointError
from embodied_models.lingbot_va.checkpoint import (
    INDEX_NAME,
    convert_wan22_folder,
    load_state_strict,
    load_transformer_folder,
    map_keys,
    save_transformer_folder,
)
from embodied_models.lingbot_va.rope import video_grid_ids
from embodied_models.lingbot_va.transformer import LingBotVATransformer

TINY = {"patch_size": (1, 2, 2), "num_attention_heads": 2, "attention_head_dim": 12, "in_channels": 8,
        "out_channels": 8, "text_dim": 16, "freq_dim": 16, "ffn_dim": 48, "num_layers": 2}


def _tiny(seed: int = 0) -> LingBotVATransformer:
    torch.manual_seed(seed)
    return LingBotVATransformer(**TINY, action_dim=8, attention_backend="sdpa").eval()


def test_sharded_folder_round_trip_and_diffusers_loading(tmp_path):
    net = _tiny(0)
    folder = save_transformer_folder(net.state_dict(), net.config, tmp_path, max_shard_bytes=20_000)
    index = json.loads((folder / INDEX_NAME).read_text())
    assert len(set(index["weight_map"].values())) > 1 and set(index["weight_map"]) == set(net.state_dict())
    other = _tiny(1)
    report = load_transformer_folder(other, tmp_path)  # the parent folder resolves to transformer/
    assert report.ok
    for key, value in net.state_dict().items():
        assert torch.equal(value, other.state_dict()[key]), key
    # A diffusers user loads the folder directly.
    loaded = LingBotVATransformer.from_pretrained(str(folder))
    assert torch.equal(loaded.state_dict()["blocks.1.ffn.net.2.weight"], net.state_dict()["blocks.1.ffn.net.2.weight"])


def test_strict_report_names_every_difference(tmp_path):
    net = _tiny()
    state = dict(net.state_dict())
    state.pop("blocks.0.attn1.to_q.weight")
    state["blocks.0.extra.weight"] = torch.zeros(1)
    state["proj_out.bias"] = torch.zeros(3)
    with pytest.raises(CheckpointError) as err:
        load_state_strict(net, state, source="ckpt")
    message = str(err.value)
    assert "blocks.0.attn1.to_q.weight" in message and "blocks.0.extra.weight" in message
    assert "proj_out.bias: checkpoint (3,)" in message


def test_lerobot_policy_key_map():
    net = _tiny()
    policy_state = {f"transformer.{k}": v for k, v in net.state_dict().items()}
    assert load_state_strict(_tiny(2), map_keys(policy_state, "lerobot"), source="policy").ok
    with pytest.raises(CheckpointError, match=r"start with .transformer\.."):
        map_keys({"vae.weight": torch.zeros(1)}, "lerobot")
    with pytest.raises(CheckpointError, match="choose one of"):
        map_keys({}, "lerobot_v2")


def test_wan22_conversion_reproduces_the_base_video_prediction(tmp_path):
    """A tiny random diffusers Wan2.2 transformer, converted, predicts the same video velocity."""
    torch.manual_seed(0)
    wan = WanTransformer3DModel(**TINY, rope_max_seq_len=64).eval()
    wan.save_pretrained(str(tmp_path / "wan" / "transformer"), max_shard_size="50KB")
    net = _tiny(3)
    folder = convert_wan22_folder(tmp_path / "wan", net, tmp_path / "out")
    state = net.state_dict()
    assert torch.equal(state["patch_embedding_mlp.weight"], wan.patch_embedding.weight.flatten(1))
    assert torch.equal(state["condition_embedder_action.time_proj.weight"],
                       wan.condition_embedder.time_proj.weight)
    assert not state["action_proj_out.weight"].any()
    assert load_transformer_folder(_tiny(4), folder).ok

    b, frames, h, w = 2, 3, 4, 6
    latents = torch.randn(b, 8, frames, h, w)
    text = torch.randn(b, 7, 16)
    frame_t = torch.tensor([[0.0, 300.0, 700.0], [10.0, 500.0, 999.0]])
    tokens_per_frame = (h // 2) * (w // 2)
    with torch.no_grad():
        expected = wan(latents, frame_t.repeat_interleave(tokens_per_frame, dim=1), text).sample
        grid = video_grid_ids(frames, h // 2, w // 2).expand(b, -1, -1)
        ours = net.video_pred_to_grid(net(latents, frame_t, grid, text), frames, h, w)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


def test_wan22_conversion_rejects_other_shapes(tmp_path):
    wan = WanTransformer3DModel(**{**TINY, "ffn_dim": 40})
    wan.save_pretrained(str(tmp_path / "transformer"))
    with pytest.raises(CheckpointError, match="ffn"):
        convert_wan22_folder(tmp_path, _tiny(), tmp_path / "out")


def test_build_model_loads_pretrained_layouts(tmp_path):
    """model.pretrained_path with the three layouts: LingBot-VA folder, lerobot policy file, raw Wan2.2."""
    from safetensors.torch import save_file

    from embodied_core.config.resolve import load_config
    from embodied_models.lingbot_va.modeling import build_model

    source = _tiny(5)
    save_transformer_folder(source.state_dict(), source.config, tmp_path / "release")
    (tmp_path / "policy").mkdir()
    save_file({f"transformer.{k}": v.contiguous() for k, v in source.state_dict().items()},
              str(tmp_path / "policy" / "model.safetensors"))
    torch.manual_seed(0)
    WanTransformer3DModel(**TINY).save_pretrained(str(tmp_path / "wan" / "transformer"))
    for path, layout in ((tmp_path / "release", "lingbot_va"), (tmp_path / "policy", "lerobot"),
                         (tmp_path / "wan", "wan22")):
        config = load_config(training={"model_name": "lingbot_va_tiny"},
                             model={"pretrained_path": str(path), "pretrained_layout": layout})
        model = build_model(config.model, config.data)
        if layout != "wan22":
            assert torch.equal(model.transformer.state_dict()["blocks.0.attn1.to_q.weight"],
                               source.state_dict()["blocks.0.attn1.to_q.weight"])
    config = load_config(training={"model_name": "lingbot_va_tiny"}, model={"pretrained_path": str(tmp_path / "wan")})
    with pytest.raises(CheckpointError, match="pretrained_layout=wan22"):
        build_model(config.model, config.data)


def test_unreadable_weights_are_a_checkpoint_error_naming_the_file(tmp_path):
    net = _tiny()
    folder = save_transformer_folder(net.state_dict(), net.config, tmp_path)
    weights = folder / "diffusion_pytorch_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # truncated
    with pytest.raises(CheckpointError, match="truncated or corrupt") as err:
        load_transformer_folder(_tiny(), tmp_path)
    assert str(weights) in str(err.value)
