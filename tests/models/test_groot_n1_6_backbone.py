"""GR00T N1.6's Eagle3 backbone against transformers' own classes where they compute the same thing (tiny sizes):
the truncated language model is ``Qwen3Model`` cut to ``select_layer`` layers (left padding, plain column positions,
final norm), and the vision tower with windows and RoPE off (the released Eagle config) is ``Siglip2VisionModel``
(the same state dict, SigLIP2's unread pooling head included); windowed layers never mix tiles or images."""

from __future__ import annotations

import attrs
import pytest
import torch
from transformers import Qwen3Model, Siglip2VisionConfig, Siglip2VisionModel

from embodied_core.config.resolve import load_config
from embodied_models.groot_n1_6.backbone import EagleBackbone, qwen3_config
from embodied_models.groot_n1_6.siglip2 import Siglip2VisionTower, patchify, window_ids

TOL = {"atol": 1e-5, "rtol": 1e-5}


@pytest.fixture(scope="module")
def model_cfg():
    return load_config("groot_n1_6_tiny", training={"dataset_format": "dummy_datasets"},
                       data={"state_dim": 4, "action_dim": 3, "camera_keys": ["cam"]}).model


def test_truncated_language_model_is_transformers_qwen3(model_cfg):
    torch.manual_seed(0)
    backbone = EagleBackbone(model_cfg).eval()
    reference = Qwen3Model(qwen3_config(model_cfg)).eval()
    reference.load_state_dict({k.removeprefix("backbone."): v for k, v in {
        **{f"embed_tokens.{n}": p for n, p in backbone.embed_tokens.state_dict().items()},
        **{f"layers.{n}": p for n, p in backbone.layers.state_dict().items()},
        **{f"norm.{n}": p for n, p in backbone.norm.state_dict().items()}}.items()})
    embeds = torch.randn(2, 9, model_cfg.llm_width)
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[1, :4] = False  # left padding
    with torch.no_grad():
        ours = backbone.language(embeds, mask)
        theirs = reference(inputs_embeds=embeds, attention_mask=mask.long()).last_hidden_state
    torch.testing.assert_close(ours[mask], theirs[mask], **TOL)
    assert torch.isfinite(ours).all()  # fully masked (padded) query rows give finite values


def test_tower_without_windows_or_rope_is_transformers_siglip2(model_cfg):
    cfg = attrs.evolve(model_cfg, vision_windowed_attention=False, vision_rope=False)
    torch.manual_seed(1)
    tower = Siglip2VisionTower(cfg).eval()
    reference = Siglip2VisionModel(Siglip2VisionConfig(
        hidden_size=cfg.vision_width, intermediate_size=cfg.vision_mlp_dim, num_hidden_layers=cfg.vision_depth,
        num_attention_heads=cfg.vision_num_heads, num_patches=cfg.vision_num_patches,
        patch_size=cfg.vision_patch_size, layer_norm_eps=cfg.vision_layer_norm_eps)).eval()
    reference.load_state_dict(tower.state_dict(), strict=True)  # the same names, the pooling head included
    images = [torch.randn(3, 32, 48), torch.randn(3, 48, 16)]
    grids = [(4, 6), (6, 2)]
    length = max(h * w for h, w in grids)
    patches = torch.zeros(2, length, 3 * cfg.vision_patch_size ** 2)
    valid = torch.zeros(2, length, dtype=torch.long)
    for i, (image, (h, w)) in enumerate(zip(images, grids, strict=True)):
        patches[i, : h * w] = patchify(image[None], cfg.vision_patch_size)[0]
        valid[i, : h * w] = 1
    with torch.no_grad():
        ours = tower(images)
        theirs = reference(pixel_values=patches, pixel_attention_mask=valid,
                           spatial_shapes=torch.tensor(grids)).last_hidden_state
    for i, (h, w) in enumerate(grids):
        torch.testing.assert_close(ours[i], theirs[i, : h * w], **TOL)


def test_windowed_layers_attend_within_their_tile_and_image(model_cfg):
    cfg = attrs.evolve(model_cfg, vision_full_attention_layers=[])
    torch.manual_seed(2)
    tower = Siglip2VisionTower(cfg).eval()
    images = [torch.randn(3, 32, 32), torch.randn(3, 32, 32)]
    changed = [images[0].clone(), images[1]]
    changed[0][:, :8, :8] += 1.0  # the first patch, in tile 0 of image 0
    with torch.no_grad():
        before, after = tower(images), tower(changed)
    tiles = window_ids(4, 4, cfg.vision_window_size)
    moved = (after[0] - before[0]).abs().amax(-1) > 1e-6
    assert torch.equal(moved, tiles == 0) and torch.equal(after[1], before[1])
