"""SmolVLA: lerobot 0.6.1's ``VLAFlowMatching`` (SmolVLM + Llama expert) vs our ``SmolVLAModel``.

lerobot reads the VLM config and processor by name from the hub; here ``AutoConfig`` / ``AutoProcessor`` are
served locally (a ``SmolVLMConfig`` at the size below, a tokenizer stand-in carrying the two image special-token
ids), and with ``load_vlm_weights=False`` lerobot builds ``SmolVLMForConditionalGeneration(config)``. lerobot's own
defaults are kept: ``freeze_vision_encoder`` and ``train_expert_only`` (the step trains the expert and the
projections), ``attention_mode`` cross_attn, joint attention every 2nd layer. lerobot's side writes its
``config.json`` (``SmolVLAConfig._save_pretrained``) and the VLM config; our side reads both through our importer's
translation (``lerobot_configs``) and loads lerobot's ``model.``-prefixed weights with our strict loader.

The loss is lerobot's policy reduction (ours too): the per-element flow-matching loss for the given noise and
time, averaged over the real action dims. Sizes: ``tiny`` (smoke) and ``mid`` (VLM 256 wide x 8 layers, vision
192 x 4 at 256 px / patch 16, expert 0.75 x, 2 cameras, chunk 50, batch 8).
"""

from __future__ import annotations

import json
import os
import tempfile
import types
from pathlib import Path
from typing import Any

from benchmarks.lerobot_cases import Side

SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"vision_width": 32, "vision_mlp": 64, "vision_depth": 2, "vision_heads": 2, "image": 32, "patch": 8,
             "scale": 2, "width": 64, "mlp": 128, "layers": 4, "heads": 4, "kv_heads": 2, "head_dim": 16,
             "vocab": 128, "tokens": 12, "chunk": 6, "state": 10, "action": 12, "real_state": 6, "real_action": 7,
             "cameras": 2, "batch": 2},
    "mid": {"vision_width": 192, "vision_mlp": 768, "vision_depth": 4, "vision_heads": 4, "image": 256, "patch": 16,
            "scale": 4, "width": 256, "mlp": 1024, "layers": 8, "heads": 8, "kv_heads": 2, "head_dim": 32,
            "vocab": 1024, "tokens": 48, "chunk": 50, "state": 32, "action": 32, "real_state": 14,
            "real_action": 14, "cameras": 2, "batch": 8},
}
LEROBOT_COMPILE = True  # SmolVLAConfig.compile_model
WEIGHTS, CONFIG, VLM_CONFIG = "model.safetensors", "config.json", "vlm_config.json"


def _special(size: dict[str, Any]) -> dict[str, int]:
    return {"fake_image_token_id": size["vocab"] - 3, "global_image_token_id": size["vocab"] - 2}


def vlm_config(size: dict[str, Any]) -> dict[str, Any]:
    """The SmolVLM config lerobot is handed (what ``AutoConfig.from_pretrained`` would read from the hub)."""
    return {
        "vision_config": {"hidden_size": size["vision_width"], "intermediate_size": size["vision_mlp"],
                          "num_hidden_layers": size["vision_depth"], "num_attention_heads": size["vision_heads"],
                          "num_channels": 3, "image_size": size["image"], "patch_size": size["patch"],
                          "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6, "attention_dropout": 0.0},
        "text_config": {"model_type": "llama", "vocab_size": size["vocab"], "hidden_size": size["width"],
                        "intermediate_size": size["mlp"], "num_hidden_layers": size["layers"],
                        "num_attention_heads": size["heads"], "num_key_value_heads": size["kv_heads"],
                        "head_dim": size["head_dim"], "rms_norm_eps": 1e-5, "hidden_act": "silu",
                        "rope_theta": 100000.0, "max_position_embeddings": 1024, "attention_bias": False,
                        "mlp_bias": False, "tie_word_embeddings": False, "pad_token_id": 0},
        "scale_factor": size["scale"], "image_token_id": size["vocab"] - 1, "tie_word_embeddings": False,
        "pad_token_id": 0,
    }


def describe(size: dict[str, Any]) -> str:
    return (f"VLM {size['width']}x{size['layers']}, vision {size['vision_width']}x{size['vision_depth']} at "
            f"{size['image']} px / patch {size['patch']}, expert 0.75x, {size['cameras']} cameras, chunk "
            f"{size['chunk']}, batch {size['batch']}; lerobot's defaults: vision frozen, expert + projections trained")


def make_inputs(size: dict[str, Any]) -> dict[str, Any]:
    """Per-camera images in [-1, 1] (camera 1 of the last element absent), right-padded tokens (pad id 0), state
    and actions zero beyond the real dims, noise and time."""
    import torch

    b, gen = size["batch"], torch.Generator().manual_seed(0)
    out: dict[str, Any] = {}
    for cam in range(size["cameras"]):
        out[f"image.cam{cam}"] = torch.rand(b, 3, size["image"], size["image"], generator=gen) * 2 - 1
        mask = torch.ones(b, dtype=torch.bool)
        if cam == 1:
            mask[-1] = False
        out[f"image_mask.cam{cam}"] = mask
    tokens = torch.randint(3, size["vocab"] - 3, (b, size["tokens"]), generator=gen)
    lengths = torch.randint(size["tokens"] // 2, size["tokens"] + 1, (b,), generator=gen)
    lang_mask = torch.arange(size["tokens"])[None] < lengths[:, None]
    state = torch.zeros(b, size["state"])
    state[:, :size["real_state"]] = torch.randn(b, size["real_state"], generator=gen)
    actions = torch.zeros(b, size["chunk"], size["action"])
    actions[..., :size["real_action"]] = torch.randn(b, size["chunk"], size["real_action"], generator=gen)
    out.update(lang_tokens=tokens * lang_mask, lang_mask=lang_mask, state=state, actions=actions,
               noise=torch.randn(b, size["chunk"], size["action"], generator=gen),
               time=torch.rand(b, generator=gen) * 0.999 + 0.001)
    return out


def _stub_hub(size: dict[str, Any]) -> None:
    """lerobot's SmolVLMWithExpertModel reads the VLM config and processor by name: serve them locally."""
    from lerobot.policies.smolvla import smolvlm_with_expert as module
    from transformers import SmolVLMConfig

    tokenizer = types.SimpleNamespace(**_special(size))
    module.AutoConfig = types.SimpleNamespace(from_pretrained=lambda name, **kw: SmolVLMConfig(**vlm_config(size)))
    module.AutoProcessor = types.SimpleNamespace(
        from_pretrained=lambda name, **kw: types.SimpleNamespace(tokenizer=tokenizer))


def lerobot_config(size: dict[str, Any], *, compile_model: bool) -> Any:
    from lerobot.configs import FeatureType, PolicyFeature
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig

    config = SmolVLAConfig(chunk_size=size["chunk"], n_action_steps=size["chunk"], max_state_dim=size["state"],
                           max_action_dim=size["action"], resize_imgs_with_padding=(size["image"], size["image"]),
                           vlm_model_name="stub/smolvlm", load_vlm_weights=False, num_vlm_layers=size["layers"],
                           compile_model=compile_model, compile_mode="default", device="cpu", push_to_hub=False)
    config.input_features = {
        "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(size["real_state"],)),
        **{f"observation.images.cam{i}": PolicyFeature(type=FeatureType.VISUAL, shape=(3, size["image"], size["image"]))
           for i in range(size["cameras"])}}
    config.output_features = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(size["real_action"],))}
    return config


def _images(size: dict[str, Any], inputs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    cams = range(size["cameras"])
    return [inputs[f"image.cam{i}"] for i in cams], [inputs[f"image_mask.cam{i}"] for i in cams]


def lerobot_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any, *,
                 compile_model: bool) -> Side:
    import torch
    from lerobot.policies.smolvla.modeling_smolvla import VLAFlowMatching
    from safetensors.torch import load_file, save_file

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _stub_hub(size)
    config = lerobot_config(size, compile_model=compile_model)
    torch.manual_seed(0)
    with torch.device(device):
        model = VLAFlowMatching(config)
    weights = work / WEIGHTS
    if not weights.exists():  # the first lerobot run writes what every run loads: SmolVLAPolicy's layout
        save_file({f"model.{k}": v.contiguous() for k, v in model.state_dict().items()}, str(weights))
        with tempfile.TemporaryDirectory() as folder:
            config._save_pretrained(Path(folder))
            (work / CONFIG).write_text((Path(folder) / CONFIG).read_text())
        (work / VLM_CONFIG).write_text(json.dumps(vlm_config(size)))
    state = load_file(str(weights), device=str(device))
    model.load_state_dict({k.removeprefix("model."): v for k, v in state.items()}, strict=True)
    images, masks = _images(size, inputs)
    args = (images, masks, inputs["lang_tokens"], inputs["lang_mask"], inputs["state"])
    real = size["real_action"]

    def loss(step: int) -> Any:
        del step
        return model(*args, inputs["actions"], noise=inputs["noise"], time=inputs["time"])[..., :real].mean()

    def predict() -> Any:
        return model.sample_actions(*args, noise=inputs["noise"])

    return Side(model=model, loss=loss, compiled="compile_model" if compile_model else "", predict=predict)


def our_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any) -> Side:
    import torch

    from embodied_models.smolvla.batch import SmolVLAPreparedBatch
    from embodied_models.smolvla.checkpoint import load_smolvla_checkpoint
    from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig
    from embodied_models.smolvla.lerobot_import import lerobot_configs
    from embodied_models.smolvla.modeling import SmolVLAModel

    model_dict, data_dict = lerobot_configs(json.loads((work / CONFIG).read_text()),
                                            json.loads((work / VLM_CONFIG).read_text()),
                                            model_defaults={}, data_defaults={}, source=work / CONFIG)
    model_cfg = SmolVLAModelConfig(**{**model_dict, **_special(size)})
    data_cfg = SmolVLADataConfig(**{**data_dict, "image_size": tuple(data_dict["image_size"])})
    torch.manual_seed(1)  # another init than lerobot's: every value must come from the file
    with torch.device(device):
        model = SmolVLAModel(model_cfg, data_cfg)
    report = load_smolvla_checkpoint(model, work / WEIGHTS)
    if not report.ok:
        raise SystemExit(f"smolvla: our strict loader refused lerobot's weights: {report}")
    images, masks = _images(size, inputs)
    batch = SmolVLAPreparedBatch(images=tuple(images), image_masks=torch.stack(masks, dim=1),
                                 tokens=inputs["lang_tokens"], token_mask=inputs["lang_mask"], state=inputs["state"],
                                 actions=inputs["actions"], action_is_pad=None)
    real = size["real_action"]

    def loss(step: int) -> Any:
        del step
        return model.loss_elements(batch, noise=inputs["noise"], time=inputs["time"])[..., :real].mean()

    def predict() -> Any:
        return model.sample_actions(batch, noise=inputs["noise"])

    return Side(model=model, loss=loss, predict=predict)
