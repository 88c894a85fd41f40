"""X-VLA: lerobot 0.6.1's ``XVLAModel`` (Florence-2 encoder + soft-prompted transformer) vs our ``XvlaModel``.

lerobot's side builds ``XVLAConfig(florence_config=...)`` at the size below and writes its ``config.json``
(``XVLAConfig._save_pretrained``) beside the weights (``XVLAPolicy``'s ``model.`` layout, BART's tied embedding
once); our side reads the config through ``embodied_models.xvla.reference`` and loads the file with our strict
loader, whose config check runs too. lerobot's defaults: the ``ee6d`` action space (20 dims, BCE grippers), every
part trained. Both modules run in eval mode: lerobot hard-codes dropout 0.1 in the soft-prompted transformer, which
no two implementations can draw alike; eval turns dropout off and leaves the step's work otherwise unchanged
(autograd is on). lerobot draws ``u = rand(1)`` and the noise inside its forward; ours draws them in the same
order from the same seeded global RNG. The loss is the sum of the action space's terms (both sides).

Sizes: ``tiny`` (smoke) and ``mid`` (DaViT 64/128/192/256 at 224 px, 2 views; BART 256 x 4; transformer 256 x 6;
chunk 30; batch 8).
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.lerobot_cases import Side

SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"dims": [8, 16], "depths": [1, 1], "vheads": [1, 2], "patch": [7, 3], "stride": [4, 2],
             "pad": [3, 1], "window": 2, "image": 32, "proj": 24, "text_width": 24, "text_layers": 1,
             "text_heads": 2, "text_ffn": 32, "vocab": 64, "tokens": 8, "hidden": 24, "depth": 2, "heads": 2,
             "views": 2, "chunk": 5, "state": 20, "soft": 4, "batch": 2},
    "mid": {"dims": [64, 128, 192, 256], "depths": [1, 1, 3, 1], "vheads": [2, 4, 6, 8], "patch": [7, 3, 3, 3],
            "stride": [4, 2, 2, 2], "pad": [3, 1, 1, 1], "window": 7, "image": 224, "proj": 256, "text_width": 256,
            "text_layers": 4, "text_heads": 4, "text_ffn": 1024, "vocab": 1024, "tokens": 32, "hidden": 256,
            "depth": 6, "heads": 8, "views": 2, "chunk": 30, "state": 20, "soft": 16, "batch": 8},
}
LEROBOT_COMPILE = False
WEIGHTS, CONFIG = "model.safetensors", "config.json"
ACTION_DIM, GRIPPERS = 20, (9, 19)  # lerobot's ee6d space


def florence_config(size: dict[str, Any]) -> dict[str, Any]:
    """The Florence-2 config (the remote-code format of the released checkpoints, which lerobot translates)."""
    stages = len(size["dims"])
    grid = size["image"]
    for stride in size["stride"]:
        grid = math.ceil(grid / stride)
    return {
        "vision_config": {
            "model_type": "davit", "dim_embed": size["dims"], "depths": size["depths"],
            "num_heads": size["vheads"], "num_groups": size["vheads"], "patch_size": size["patch"],
            "patch_stride": size["stride"], "patch_padding": size["pad"],
            "patch_prenorm": [False] + [True] * (stages - 1), "window_size": size["window"], "mlp_ratio": 4.0,
            "drop_path_rate": 0.0, "projection_dim": size["proj"], "enable_checkpoint": False,
            "image_pos_embed": {"type": "learned_abs_2d", "max_pos_embeddings": max(grid, 2)},
            "visual_temporal_embedding": {"type": "COSINE", "max_temporal_embeddings": 2},
            "image_feature_source": ["spatial_avg_pool", "temporal_avg_pool"],
        },
        "text_config": {
            "vocab_size": size["vocab"], "d_model": size["text_width"], "encoder_layers": size["text_layers"],
            "encoder_attention_heads": size["text_heads"], "encoder_ffn_dim": size["text_ffn"], "decoder_layers": 1,
            "decoder_attention_heads": size["text_heads"], "decoder_ffn_dim": size["text_ffn"],
            "max_position_embeddings": 128, "scale_embedding": False, "activation_function": "gelu",
            "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0, "init_std": 0.02,
            "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "is_encoder_decoder": True,
        },
        "projection_dim": size["proj"], "vocab_size": size["vocab"], "pad_token_id": 1, "bos_token_id": 0,
        "eos_token_id": 2,
    }


def describe(size: dict[str, Any]) -> str:
    return (f"DaViT {'/'.join(map(str, size['dims']))} at {size['image']} px x {size['views']} views, BART "
            f"{size['text_width']}x{size['text_layers']}, transformer {size['hidden']}x{size['depth']}, ee6d, chunk "
            f"{size['chunk']}, batch {size['batch']}; eval mode (lerobot's fixed dropout off)")


def make_inputs(size: dict[str, Any]) -> dict[str, Any]:
    """Views in [0, 1] (view 1 of the last element absent, zeros as lerobot feeds), token ids with BOS/EOS and pad
    1, a domain per element, state, and ee6d actions whose gripper channels are 0/1 (BCE targets)."""
    import torch

    b, gen = size["batch"], torch.Generator().manual_seed(0)
    mask = torch.ones(b, size["views"], dtype=torch.bool)
    mask[-1, 1:] = False
    images = torch.rand(b, size["views"], 3, size["image"], size["image"], generator=gen) * mask[..., None, None, None]
    ids = torch.randint(3, size["vocab"], (b, size["tokens"]), generator=gen)
    lengths = torch.randint(size["tokens"] // 2, size["tokens"] + 1, (b,), generator=gen)
    for i, n in enumerate(lengths.tolist()):
        ids[i, 0], ids[i, n - 1], ids[i, n:] = 0, 2, 1
    actions = torch.randn(b, size["chunk"], ACTION_DIM, generator=gen)
    actions[..., list(GRIPPERS)] = (torch.rand(b, size["chunk"], 2, generator=gen) > 0.5).float()
    return {"image_input": images, "image_mask": mask, "input_ids": ids,
            "domain_id": torch.arange(b) % 2, "proprio": torch.randn(b, size["state"], generator=gen),
            "action": actions}


def lerobot_config(size: dict[str, Any]) -> Any:
    from lerobot.configs import FeatureType, PolicyFeature
    from lerobot.policies.xvla.configuration_xvla import XVLAConfig

    config = XVLAConfig(florence_config=florence_config(size), chunk_size=size["chunk"], n_action_steps=size["chunk"],
                        hidden_size=size["hidden"], depth=size["depth"], num_heads=size["heads"], num_domains=2,
                        len_soft_prompts=size["soft"], max_len_seq=512, max_state_dim=size["state"],
                        max_action_dim=ACTION_DIM, tokenizer_max_length=size["tokens"],
                        resize_imgs_with_padding=(size["image"], size["image"]), num_image_views=size["views"],
                        device="cpu")
    config.input_features = {
        "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(size["state"],)),
        **{f"observation.images.cam{i}": PolicyFeature(type=FeatureType.VISUAL, shape=(3, size["image"], size["image"]))
           for i in range(size["views"])}}
    config.output_features = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(ACTION_DIM,))}
    return config


def _policy_state_dict(model: Any) -> dict[str, Any]:
    """``XVLAPolicy``'s layout (``model.`` prefix), one name per shared tensor, as safetensors stores tied weights."""
    seen, out = set(), {}
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        out[f"model.{name}"] = tensor.detach().clone().contiguous()
    return out


def lerobot_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any, *,
                 compile_model: bool) -> Side:
    import torch
    from lerobot.policies.xvla.modeling_xvla import XVLAModel
    from safetensors.torch import load_file, save_file

    del compile_model  # lerobot's X-VLA has no compile switch
    config = lerobot_config(size)
    torch.manual_seed(0)
    with torch.device(device):
        model = XVLAModel(config=config, florence_config=config.get_florence_config(), proprio_dim=size["state"])
    weights = work / WEIGHTS
    if not weights.exists():  # the first lerobot run writes what every run loads
        save_file(_policy_state_dict(model), str(weights))
        with tempfile.TemporaryDirectory() as folder:
            config._save_pretrained(Path(folder))
            (work / CONFIG).write_text((Path(folder) / CONFIG).read_text())
    state = {k.removeprefix("model."): v for k, v in load_file(str(weights), device=str(device)).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or any("embed_tokens" not in k for k in missing):  # the tied copies only
        raise SystemExit(f"xvla: lerobot's own weights did not load back: {missing} {unexpected}")
    args = (inputs["input_ids"], inputs["image_input"], inputs["image_mask"], inputs["domain_id"], inputs["proprio"])

    def loss(step: int) -> Any:
        del step
        return sum(model(*args, inputs["action"]).values())

    def predict() -> Any:
        return model.generate_actions(*args, steps=config.num_denoising_steps)

    return Side(model=model, loss=loss, train_mode=False, predict=predict)


def our_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any) -> Side:
    import torch

    from embodied_models.xvla.batch import XvlaPreparedBatch
    from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig
    from embodied_models.xvla.modeling import XvlaModel
    from embodied_models.xvla.reference import reference_model_fields

    fields = reference_model_fields(json.loads((work / CONFIG).read_text()), source=str(work / CONFIG))
    data = XvlaDataConfig(camera_keys=[f"cam{i}" for i in range(size["views"])],
                          image_size=(size["image"], size["image"]), action_horizon=size["chunk"],
                          action_dim=ACTION_DIM, state_dim=size["state"])
    torch.manual_seed(1)  # another init than lerobot's: every value must come from the file
    with torch.device(device):
        model = XvlaModel(XvlaModelConfig(**fields), data)
    report = model.load_pretrained_checkpoint(work / WEIGHTS)
    if not report.ok:
        raise SystemExit(f"xvla: our strict loader refused lerobot's weights: {report}")
    batch = XvlaPreparedBatch(images=inputs["image_input"], image_masks=inputs["image_mask"],
                              tokens=inputs["input_ids"], domain_id=inputs["domain_id"], state=inputs["proprio"],
                              actions=inputs["action"])

    def loss(step: int) -> Any:
        del step
        losses, _ = model.training_outputs(batch)  # u, then the noise: lerobot's draws from the same seed
        return sum(losses.values())

    def predict() -> Any:
        return model.sample_actions(batch)

    return Side(model=model, loss=loss, train_mode=False, predict=predict)
