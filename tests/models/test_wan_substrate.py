"""The shared Wan pieces (embodied_models.wan): RoPE splits and rotation, patchify / unpatchify orders, the flow
schedule and weights, the cache meta checks, and the tiny VAE / UMT5 builders."""

from __future__ import annotations

import pytest
import torch

from embodied_core.errors import DataError
from tests.support import DATASETS_DIR


def test_rope_splits_and_interleaved_rotation():
    from embodied_models.wan.rope import GridRope, apply_rope, rope_split, sequence_grid_ids

    assert rope_split(16, "pairs") == (8, 4, 4) and rope_split(128, "pairs") == rope_split(128) == (44, 42, 42)
    with pytest.raises(ValueError, match="each must be even"):
        GridRope(16)  # the channel split (6, 5, 5) of head_dim 16 is odd
    rope = GridRope(4, split=(4,))
    x = torch.tensor([[[[1.0, 0.0, 1.0, 0.0]]]]).expand(1, 2, 1, 4)  # pairs (x0, x1), (x2, x3)
    out = apply_rope(x, rope(sequence_grid_ids(2)[None]))
    angle = torch.tensor(1.0)  # position 1, frequency theta**0 for the first pair
    torch.testing.assert_close(out[0, 1, 0, :2], torch.stack([angle.cos(), angle.sin()]))
    torch.testing.assert_close(out[0, 0], x[0, 0])


def test_patchify_and_unpatchify_orders():
    from embodied_models.wan.patch import conv3d_weight_to_linear, patchify, token_grid, unpatchify

    latents = torch.randn(2, 3, 2, 4, 6)
    tokens = patchify(latents, (1, 2, 2))
    assert tokens.shape == (2, 12, 12) and token_grid(latents.shape, (1, 2, 2)) == (2, 2, 3)
    torch.testing.assert_close(tokens[0, 4], latents[0, :, 0, 2:4, 2:4].reshape(-1))  # token (0, 1, 1), (c, ph, pw)
    conv = torch.nn.Conv3d(3, 5, (1, 2, 2), stride=(1, 2, 2))
    direct = conv(latents).flatten(2).transpose(1, 2)
    torch.testing.assert_close(tokens @ conv3d_weight_to_linear(conv.weight).T + conv.bias, direct)
    head = tokens.unflatten(-1, (3, 4)).transpose(-1, -2).flatten(-2)  # features (pt, ph, pw, c)
    torch.testing.assert_close(unpatchify(head, (2, 2, 3), (1, 2, 2)), latents)


def test_flow_schedule_and_weights():
    from embodied_models.wan.flow import FlowMatchSchedule, bell_weight, inference_schedule, shift_sigma

    sigmas, timesteps, deltas = inference_schedule(5.0, 4)
    assert sigmas[0] == 1.0 and torch.allclose(sigmas + deltas, torch.cat([sigmas[1:], torch.zeros(1)]))
    torch.testing.assert_close(timesteps, sigmas * 1000)
    grid = 1000 * shift_sigma(torch.linspace(1, 0, 1001, dtype=torch.float64)[:-1], 5.0)
    weights = bell_weight(grid, 5.0)
    assert abs(float(weights.mean()) - 1) < 1e-5 and float(weights.min()) == pytest.approx(0.0, abs=1e-6)
    table = FlowMatchSchedule(5.0)
    assert abs(float(table.weights.mean()) - 1) < 1e-4


def test_cache_meta_checks(tmp_path):
    from embodied_models.wan.cache import check_cache_matches, read_cache_meta, write_cache_meta

    with pytest.raises(DataError, match=r"no toy cache .* Build it with: make-it"):
        read_cache_meta(tmp_path, format_name="toy/1", what="toy cache", command_hint="make-it")
    write_cache_meta(tmp_path, {"image_size": [16, 16]}, format_name="toy/1")
    meta = read_cache_meta(tmp_path, format_name="toy/1", what="toy cache", command_hint="make-it")
    check_cache_matches(meta, {"image_size": (16, 16)}, ("image_size",), cache=tmp_path, command_hint="make-it")
    with pytest.raises(DataError, match=r"image_size: cache \[16, 16\] vs run \(32, 32\)"):
        check_cache_matches(meta, {"image_size": (32, 32)}, ("image_size",), cache=tmp_path, command_hint="make-it")
    with pytest.raises(DataError, match="format 'toy/1', expected 'toy/2'"):
        read_cache_meta(tmp_path, format_name="toy/2", what="toy cache", command_hint="make-it")


def test_tiny_vae_and_umt5(tmp_path):
    from embodied_models.wan.text import UMT5TextEncoder, build_tiny_umt5
    from embodied_models.wan.vae import build_tiny_vae, encode_video

    vae = build_tiny_vae()
    latents = encode_video(vae, torch.zeros(1, 3, 5, 32, 64))
    assert latents.shape == (1, 8, 2, 2, 4)
    base = build_tiny_umt5(tmp_path / "base", DATASETS_DIR / "strategies" / "tokenizers" / "umt5_tiny")
    text = UMT5TextEncoder.from_base(base)
    hidden, mask = text(["pick  the &amp; red cube", "stack"], text_len=8)
    assert hidden.shape == (2, 8, 16) and mask.dtype == torch.bool
    assert mask[1].sum() < mask[0].sum() and (hidden[1][~mask[1]] == 0).all()
