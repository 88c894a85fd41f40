"""Writes ``tests/fixtures/smolvla_prefix_length/``: a second SmolVLA golden made with lerobot 0.6.1's own
``VLAFlowMatching`` at a setting the shared fixture (``../shared/fixtures/smolvla_lerobot``) does not have.

Run it in the lerobot side venv (lerobot 0.6.1, transformers 5.5.4, torch 2.13 CPU)::

    PYTHONPATH=. .venv-lerobot/bin/python benchmarks/smolvla_second_golden.py

What differs from the shared fixture (2 cameras of 32 px / patch 8, no special tokens, prefix_length -1, every VLM
layer with an expert layer, alternate self/cross layers, 4 Euler steps):

- ``prefix_length`` 72 (the prefix has 66 tokens: lerobot pads it with invalid zero tokens; known instance 5 of
  issue 26); the same weights and inputs are also run at ``prefix_length`` -1 (``unpadded.*``);
- ``add_image_special_tokens`` (``<fake_token_around_image><global-img>`` before and ``<fake_token_around_image>``
  after each camera);
- 3 cameras of 32 px at patch 4 (8 x 8 patches, one vision layer, pixel shuffle x2: 16 tokens each), one camera
  absent for one element; language length 8;
- 6 VLM layers (7 built) 24 wide with 2 heads on 1 KV head (head_dim 8), MLP 32, RMSNorm eps 1e-6; an expert
  8 wide (``expert_width_multiplier`` 0.34) with 3 layers (``num_expert_layers`` 3: VLM layers 0, 2, 4 carry one),
  ``self_attn_every_n_layers`` 4: joint layers 0 and 4, cross layers 1, 2 (with an expert layer), 3, 5 (without);
  lerobot 0.6.1 cannot sample when a joint layer has no expert layer (``torch.cat`` of no queries), so those
  layouts are not a golden;
- chunk 7, ``max_state_dim`` 9 (6 real), ``max_action_dim`` 8 (5 real), periods 0.01 / 2.0, 3 Euler steps, B = 3.

lerobot reads its VLM config and processor by name; both are stubbed here (``AutoConfig.from_pretrained`` returns
the tiny ``SmolVLMConfig`` written to ``vlm_config.json``, ``AutoProcessor.from_pretrained`` an object carrying the
two special-token ids), as the shared fixture did; with ``load_vlm_weights=False`` lerobot then builds
``SmolVLMForConditionalGeneration(config)``. Writes lerobot's own ``config.json``
(``SmolVLAConfig._save_pretrained``), ``model.safetensors`` (``SmolVLAPolicy``'s ``model.`` layout),
``inputs.safetensors``, ``expected.safetensors`` and ``fixture.json`` (layout, KV-cache shapes, seeds, versions).
Random weights: matrices N(0, 1/fan_in), norm scales 1 + N(0, 0.2^2), other vectors N(0, 0.1^2), embeddings N(0, 1).
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
import types
from pathlib import Path

import torch
from safetensors.torch import save_file

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "smolvla_prefix_length"
SEEDS = {"build": 0, "weights": 21, "inputs": 22}
BATCH, CAMERAS, IMAGE, TEXT_LEN, VALID_LEN = 3, 3, 32, 8, (8, 6, 3)
CAMERA_MASK = ((True, True, True), (True, False, True), (True, True, True))
REAL_STATE, REAL_ACTION, CHUNK, STEPS, PREFIX_LENGTH = 6, 5, 7, 3, 72
SPECIAL = {"fake_image_token_id": 45, "global_image_token_id": 46}
VLM = {
    "vision_config": {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                      "num_channels": 3, "image_size": IMAGE, "patch_size": 4, "hidden_act": "gelu_pytorch_tanh",
                      "layer_norm_eps": 1e-5, "attention_dropout": 0.0},
    "text_config": {"model_type": "llama", "vocab_size": 48, "hidden_size": 24, "intermediate_size": 32,
                    "num_hidden_layers": 7, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
                    "rms_norm_eps": 1e-6, "hidden_act": "silu", "rope_theta": 100000.0,
                    "max_position_embeddings": 256, "attention_bias": False, "mlp_bias": False,
                    "tie_word_embeddings": False, "pad_token_id": 0},
    "scale_factor": 2, "image_token_id": 47, "tie_word_embeddings": False, "pad_token_id": 0,
}
POLICY = dict(chunk_size=CHUNK, n_action_steps=CHUNK, max_state_dim=9, max_action_dim=8,
              resize_imgs_with_padding=(IMAGE, IMAGE), num_steps=STEPS, use_cache=True,
              vlm_model_name="stub/tiny-smolvlm", load_vlm_weights=False, add_image_special_tokens=True,
              attention_mode="cross_attn", prefix_length=PREFIX_LENGTH, num_expert_layers=3, num_vlm_layers=6,
              self_attn_every_n_layers=4, expert_width_multiplier=0.34, min_period=0.01, max_period=2.0,
              device="cpu", push_to_hub=False)


def _stub_hub() -> None:
    """lerobot's SmolVLMWithExpertModel reads the VLM config and processor by name: serve the tiny ones."""
    from lerobot.policies.smolvla import smolvlm_with_expert as module
    from transformers import SmolVLMConfig

    tokenizer = types.SimpleNamespace(**SPECIAL)
    module.AutoConfig = types.SimpleNamespace(from_pretrained=lambda name, **kw: SmolVLMConfig(**VLM))
    module.AutoProcessor = types.SimpleNamespace(
        from_pretrained=lambda name, **kw: types.SimpleNamespace(tokenizer=tokenizer))


def _config(prefix_length: int):
    from lerobot.configs import FeatureType, PolicyFeature
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig

    config = SmolVLAConfig(**{**POLICY, "prefix_length": prefix_length})
    config.input_features = {
        "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(REAL_STATE,)),
        **{f"observation.images.cam{i}": PolicyFeature(type=FeatureType.VISUAL, shape=(3, IMAGE, IMAGE))
           for i in range(CAMERAS)}}
    config.output_features = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(REAL_ACTION,))}
    return config


def _randomize(model: torch.nn.Module, generator: torch.Generator) -> None:
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_tokens" in name or "position_embedding" in name:
                param.copy_(torch.randn(param.shape, generator=generator))
            elif param.ndim >= 2:
                param.copy_(torch.randn(param.shape, generator=generator) / param[0].numel() ** 0.5)
            elif "norm" in name and name.endswith("weight"):
                param.copy_(1 + 0.2 * torch.randn(param.shape, generator=generator))
            else:
                param.copy_(0.1 * torch.randn(param.shape, generator=generator))


def _inputs(generator: torch.Generator) -> dict[str, torch.Tensor]:
    out = {}
    mask = torch.tensor(CAMERA_MASK)
    for i in range(CAMERAS):
        # pixel levels k / 255 (stored as uint8), mapped to [-1, 1] as SmolVLAPolicy.prepare_images does
        out[f"image_levels.cam{i}"] = torch.randint(0, 256, (BATCH, 3, IMAGE, IMAGE), generator=generator,
                                                    dtype=torch.uint8)
        out[f"image_mask.cam{i}"] = mask[:, i].clone()
    tokens = torch.randint(3, 45, (BATCH, TEXT_LEN), generator=generator)
    lang_mask = torch.arange(TEXT_LEN)[None] < torch.tensor(VALID_LEN)[:, None]
    out["lang_tokens"] = torch.where(lang_mask, tokens, torch.zeros_like(tokens))  # padded slots hold the pad id 0
    out["lang_mask"] = lang_mask
    state = torch.zeros(BATCH, 9)
    state[:, :REAL_STATE] = torch.randn((BATCH, REAL_STATE), generator=generator)
    actions = torch.zeros(BATCH, CHUNK, 8)
    actions[..., :REAL_ACTION] = torch.randn((BATCH, CHUNK, REAL_ACTION), generator=generator)
    out.update(state=state, actions=actions, noise=torch.randn((BATCH, CHUNK, 8), generator=generator),
               time=torch.rand((BATCH,), generator=generator) * 0.999 + 0.001)
    return out


def _images(inputs: dict[str, torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    images = [inputs[f"image_levels.cam{i}"].float() / 255.0 * 2.0 - 1.0 for i in range(CAMERAS)]
    return images, [inputs[f"image_mask.cam{i}"] for i in range(CAMERAS)]


def _run(model, inputs: dict[str, torch.Tensor], prefix: str, out: dict[str, torch.Tensor],
         shapes: dict[str, object]) -> None:
    from lerobot.policies.smolvla.modeling_smolvla import make_att_2d_masks

    images, masks = _images(inputs)
    args = (images, masks, inputs["lang_tokens"], inputs["lang_mask"], inputs["state"])
    with torch.no_grad():
        out[f"{prefix}loss"] = model(*args, inputs["actions"], noise=inputs["noise"], time=inputs["time"])
        out[f"{prefix}sampled_actions"] = model.sample_actions(*args, noise=inputs["noise"])
        embs, pad, att = model.embed_prefix(*args[:4], state=inputs["state"])
        att_2d = make_att_2d_masks(pad, att)
        (prefix_out, _), cache = model.vlm_with_expert.forward(
            attention_mask=att_2d, position_ids=torch.cumsum(pad, dim=1) - 1, past_key_values=None,
            inputs_embeds=[embs, None], use_cache=True)
    out[f"{prefix}debug.prefix_pad_mask"] = pad
    out[f"{prefix}debug.prefix_att_mask"] = att
    out[f"{prefix}debug.prefix_out"] = prefix_out
    out[f"{prefix}debug.cache.layer2.key"] = cache.layers[2].keys
    shapes[f"{prefix}prefix_embs"] = list(embs.shape)
    shapes[f"{prefix}prefix_out"] = list(prefix_out.shape)
    shapes[f"{prefix}cache"] = [[list(layer.keys.shape), list(layer.values.shape)] for layer in cache.layers]


def _state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {f"model.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def main() -> int:
    import lerobot
    import transformers
    from lerobot.policies.smolvla.modeling_smolvla import VLAFlowMatching

    torch.set_num_threads(1)
    _stub_hub()
    OUT.mkdir(parents=True, exist_ok=True)
    inputs = _inputs(torch.Generator().manual_seed(SEEDS["inputs"]))
    expected: dict[str, torch.Tensor] = {}
    shapes: dict[str, object] = {}
    weights = None
    for prefix_length, key in ((PREFIX_LENGTH, ""), (-1, "unpadded.")):
        config = _config(prefix_length)
        torch.manual_seed(SEEDS["build"])
        model = VLAFlowMatching(config)
        _randomize(model, torch.Generator().manual_seed(SEEDS["weights"]))
        model.eval()
        state = _state_dict(model)
        if weights is None:
            weights = state
            with tempfile.TemporaryDirectory() as folder:
                config._save_pretrained(Path(folder))
                (OUT / "config.json").write_text((Path(folder) / "config.json").read_text())
        assert weights.keys() == state.keys() and all(torch.equal(weights[k], state[k]) for k in weights)
        _run(model, inputs, key, expected, shapes)
    for name in ("loss", "sampled_actions"):
        diff = (expected[name] - expected[f"unpadded.{name}"]).abs().max().item()
        print(f"lerobot {name}: prefix_length {PREFIX_LENGTH} vs -1 max|diff| {diff:.3g}")
    for name in [k for k in expected if k.startswith("unpadded.debug.")]:
        del expected[name]  # the shapes are recorded; the padded run's tensors are the golden
    save_file(weights, str(OUT / "model.safetensors"))
    save_file({k: v.contiguous() for k, v in inputs.items()}, str(OUT / "inputs.safetensors"))
    save_file({k: v.contiguous() for k, v in expected.items()}, str(OUT / "expected.safetensors"))
    (OUT / "vlm_config.json").write_text(json.dumps(VLM, indent=1) + "\n")
    meta = {
        "reference": "lerobot 0.6.1 VLAFlowMatching (SmolVLMForConditionalGeneration + Llama expert), eval mode, "
                     "float32, CPU, one thread; AutoConfig / AutoProcessor stubbed (vlm_config.json, special_tokens)",
        "versions": {"lerobot": lerobot.__version__, "transformers": transformers.__version__,
                     "torch": torch.__version__, "python": platform.python_version()},
        "seeds": SEEDS, "special_tokens": SPECIAL, "batch_size": BATCH, "num_cameras": CAMERAS, "image_size": IMAGE,
        "camera_mask": CAMERA_MASK, "text_len": TEXT_LEN, "text_valid_len": VALID_LEN, "real_state_dim": REAL_STATE,
        "real_action_dim": REAL_ACTION, "prefix_length": PREFIX_LENGTH, "shapes": shapes,
    }
    (OUT / "fixture.json").write_text(json.dumps(meta, indent=1) + "\n")
    for path in sorted(OUT.iterdir()):
        print(f"{path.name}: {path.stat().st_size / 1024:.1f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
