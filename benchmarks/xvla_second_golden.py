"""Writes ``tests/fixtures/xvla_scaled_text/``: a second X-VLA golden made with lerobot 0.6.1's own ``XVLAModel``
at a setting the shared fixture (``../shared/fixtures/xvla_lerobot``) does not have.

Run it in the lerobot side venv (lerobot 0.6.1, transformers 5.5.4, torch 2.13 CPU)::

    PYTHONPATH=. .venv-lerobot/bin/python benchmarks/xvla_second_golden.py

What differs from the shared fixture (32 x 32 views, 2 DaViT stages, BART without embedding scale, 20-wide spaces):

- BART ``scale_embedding: true`` (the instruction's embeddings times sqrt(d_model); known instance 4 of issue 26),
  attention / activation dropout 0.0 / 0.05 (inactive in eval, read from the config);
- the vision config in the Microsoft remote-code format of the 2toINF checkpoints (``dim_embed``,
  ``image_pos_embed``, ``visual_temporal_embedding``, ``image_feature_source``), translated by lerobot;
- 3 DaViT stages (8 / 12 / 16 channels, depths 1 / 2 / 1, window 3, which pads every grid, MLP ratio 2), stems
  5/3/3 with stride 2, a 16 -> 24 projection, 36 x 28 (non-square) views, 5 x 4 = 20 grid tokens + 1 per view;
  3 views with view 0 missing for one element; BART 24 wide, 2 layers, 3 heads, FFN 32; text length 7;
- the soft-prompted transformer 24 wide, 2 blocks, 3 heads, MLP ratio 3, per-domain VLM / auxiliary projections
  (``use_hetero_proj: true``), 3 soft prompts, dim_time 6, chunk 5, 3 sampling steps, state width 14;
- the ``joint`` space (BCE grippers, 14 wide) and ``auto`` (9 real dims in 14).

It writes lerobot's own ``config.json`` (``XVLAConfig._save_pretrained``: the file a lerobot checkpoint carries),
``model.safetensors`` as ``XVLAPolicy`` saves it (``model.`` prefix; BART's tied ``encoder.embed_tokens`` left out,
as safetensors deduplicates it), ``inputs.safetensors``, ``expected.safetensors`` and ``fixture.json`` (layout, seeds,
versions). Random weights follow the shared fixture's scheme (Linear/Conv N(0, 1/fan_in), biases N(0, 0.1^2),
LayerNorm 1 + N(0, 0.2^2) / N(0, 0.1^2), token tables and soft prompts N(0, 1), position tables N(0, 0.5^2),
per-domain weights N(0, 1/in)). Prints the sizes of what it wrote and the loss values.
"""

from __future__ import annotations

import json
import math
import platform
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "xvla_scaled_text"
SEEDS = {"weights": 11, "inputs": 12, "train_draws": 13, "sample_draws": 14}
BATCH, VIEWS, IMAGE_HW, TEXT_LEN, VALID_LEN = 3, 3, (36, 28), 7, (7, 5, 3)
VIEW_MASK = ((True, True, True), (True, True, False), (False, True, False))
DOMAIN_ID = (1, 0, 1)
STATE_DIM, REAL_STATE = 14, 11
SPACES = ({"name": "joint", "action_mode": "joint"}, {"name": "auto", "action_mode": "auto", "real_dim": 9})
STEPS = 3

FLORENCE = {
    "vision_config": {
        "model_type": "davit",
        "dim_embed": [8, 12, 16], "depths": [1, 2, 1], "num_heads": [1, 2, 2], "num_groups": [2, 3, 4],
        "patch_size": [5, 3, 3], "patch_stride": [2, 2, 2], "patch_padding": [2, 1, 1],
        "patch_prenorm": [False, True, True], "window_size": 3, "mlp_ratio": 2.0, "drop_path_rate": 0.05,
        "projection_dim": 24, "enable_checkpoint": False,
        "image_pos_embed": {"type": "learned_abs_2d", "max_pos_embeddings": 6},
        "visual_temporal_embedding": {"type": "COSINE", "max_temporal_embeddings": 3},
        "image_feature_source": ["spatial_avg_pool", "temporal_avg_pool"],
    },
    "text_config": {
        "vocab_size": 64, "d_model": 24, "encoder_layers": 2, "encoder_attention_heads": 3, "encoder_ffn_dim": 32,
        "decoder_layers": 1, "decoder_attention_heads": 3, "decoder_ffn_dim": 32, "max_position_embeddings": 48,
        "scale_embedding": True, "activation_function": "gelu", "dropout": 0.1, "attention_dropout": 0.0,
        "activation_dropout": 0.05, "init_std": 0.02, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
        "is_encoder_decoder": True,
    },
    "projection_dim": 24, "vocab_size": 64, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
}
POLICY = dict(chunk_size=5, n_action_steps=5, hidden_size=24, depth=2, num_heads=3, mlp_ratio=3.0, num_domains=2,
              len_soft_prompts=3, dim_time=6, max_len_seq=80, use_hetero_proj=True, num_denoising_steps=STEPS,
              use_proprio=True, max_state_dim=STATE_DIM, max_action_dim=14, tokenizer_max_length=TEXT_LEN,
              resize_imgs_with_padding=IMAGE_HW, num_image_views=VIEWS, device="cpu")


def _config(action_mode: str, real_dim: int):
    from lerobot.configs import FeatureType, PolicyFeature
    from lerobot.policies.xvla.configuration_xvla import XVLAConfig

    config = XVLAConfig(florence_config=FLORENCE, action_mode=action_mode, **POLICY)
    config.input_features = {"observation.state": PolicyFeature(type=FeatureType.STATE, shape=(REAL_STATE,)),
                             **{f"observation.images.cam{i}": PolicyFeature(type=FeatureType.VISUAL,
                                                                           shape=(3, *IMAGE_HW))
                                for i in range(VIEWS)}}
    config.output_features = {"action": PolicyFeature(type=FeatureType.ACTION, shape=(real_dim,))}
    return config


def _randomize(model: torch.nn.Module, generator: torch.Generator) -> None:
    from lerobot.policies.xvla.soft_transformer import DomainAwareLinear

    def normal(tensor: torch.Tensor, std: float, mean: float = 0.0) -> None:
        tensor.copy_(torch.randn(tensor.shape, generator=generator) * std + mean)

    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, DomainAwareLinear):
                normal(module.fc.weight, 1 / math.sqrt(module.input_size))
                normal(module.bias.weight, 0.1)
            elif isinstance(module, torch.nn.Linear | torch.nn.Conv2d):
                normal(module.weight, 1 / math.sqrt(module.weight[0].numel()))
                if module.bias is not None:
                    normal(module.bias, 0.1)
            elif isinstance(module, torch.nn.LayerNorm):
                normal(module.weight, 0.2, 1.0)
                normal(module.bias, 0.1)
        for name, param in model.named_parameters():
            if name.endswith(("shared.weight", "soft_prompt_hub.weight")):
                normal(param, 1.0)
            elif "row_embeddings" in name or "column_embeddings" in name or name.endswith(
                    ("pos_emb", "embed_positions.weight")):
                normal(param, 0.5)


def _inputs(generator: torch.Generator) -> dict[str, torch.Tensor]:
    mask = torch.tensor(VIEW_MASK)
    # pixel values k / 255 (stored as uint8, exact in float32); lerobot feeds zeros for absent views
    levels = torch.randint(0, 256, (BATCH, VIEWS, 3, *IMAGE_HW), generator=generator, dtype=torch.uint8)
    levels = levels * mask[:, :, None, None, None]
    images = levels.float() / 255.0
    ids = torch.randint(3, FLORENCE["text_config"]["vocab_size"], (BATCH, TEXT_LEN), generator=generator)
    for b, valid in enumerate(VALID_LEN):
        ids[b, 0], ids[b, valid - 1], ids[b, valid:] = 0, 2, 1
    state = torch.zeros(BATCH, STATE_DIM)
    state[:, :REAL_STATE] = torch.randn((BATCH, REAL_STATE), generator=generator)
    out = {"image_levels": levels, "image_input": images, "image_mask": mask, "input_ids": ids, "proprio": state,
           "domain_id": torch.tensor(DOMAIN_ID)}
    for space in SPACES:
        width = 14
        real = space.get("real_dim", width)
        action = torch.zeros(BATCH, POLICY["chunk_size"], width)
        action[..., :real] = torch.randn((BATCH, POLICY["chunk_size"], real), generator=generator)
        if space["action_mode"] == "joint":  # BCE gripper targets are 0/1
            action[..., [6, 13]] = (torch.rand((BATCH, POLICY["chunk_size"], 2), generator=generator) > 0.5).float()
        out[f"{space['name']}.action"] = action
    return out


def _train(model, inputs: dict[str, torch.Tensor], name: str, out: dict[str, torch.Tensor]) -> None:
    """lerobot's XVLAModel.forward with its two draws taken under a seed and recorded, replayed step by step."""
    action = inputs[f"{name}.action"]
    torch.manual_seed(SEEDS["train_draws"])
    with torch.no_grad():
        reference_losses = model(inputs["input_ids"], inputs["image_input"], inputs["image_mask"],
                                 inputs["domain_id"], inputs["proprio"], action)
        torch.manual_seed(SEEDS["train_draws"])
        u = torch.rand(1)
        noise = torch.randn_like(action)
        enc = model.forward_vlm(inputs["input_ids"], inputs["image_input"], inputs["image_mask"])
        t = (u + torch.arange(BATCH) / BATCH) % (1 - 1e-5)
        x_t = noise * t.view(-1, 1, 1) + action * (1 - t).view(-1, 1, 1)
        proprio_m, x_t_m = model.action_space.preprocess(inputs["proprio"], x_t)
        pred = model.transformer(domain_id=inputs["domain_id"], action_with_noise=x_t_m, t=t, proprio=proprio_m,
                                 **enc)
        losses = model.action_space.compute_loss(pred, action)
    for term, value in losses.items():
        assert torch.equal(value, reference_losses[term]), (name, term)  # the replay is lerobot's forward
        out[f"{name}.train.loss.{term}"] = value
    out[f"{name}.train.loss_total"] = sum(losses.values())
    out[f"{name}.train.pred_action"] = pred
    out[f"debug.{name}.train.t"] = t
    inputs.setdefault("train.t_uniform", u)
    inputs.setdefault("train.noise", noise)


def _sample(model, inputs: dict[str, torch.Tensor], name: str, out: dict[str, torch.Tensor]) -> None:
    torch.manual_seed(SEEDS["sample_draws"])
    x1 = torch.randn(BATCH, POLICY["chunk_size"], model.dim_action)
    torch.manual_seed(SEEDS["sample_draws"])
    sampled = model.generate_actions(inputs["input_ids"], inputs["image_input"], inputs["image_mask"],
                                     inputs["domain_id"], inputs["proprio"], steps=STEPS)
    out[f"{name}.sample.action"] = sampled
    inputs.setdefault("sample.init_noise", x1)


def _debug(model, inputs: dict[str, torch.Tensor], out: dict[str, torch.Tensor]) -> None:
    present = inputs["image_mask"].reshape(-1)
    pixels = inputs["image_input"].flatten(0, 1)[present]
    with torch.no_grad():
        out["debug.vlm.vision_last_hidden"] = model.vlm.vision_tower(pixels).last_hidden_state
        out["debug.vlm.projector_out"] = model.vlm.get_image_features(pixels).pooler_output
        out["debug.vlm.text_embeds"] = model.vlm.get_input_embeddings()(inputs["input_ids"])
        enc = model.forward_vlm(inputs["input_ids"], inputs["image_input"], inputs["image_mask"])
    out["debug.vlm.encoder_out"] = enc["vlm_features"]


def _state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``XVLAPolicy``'s layout (``model.`` prefix), one name per shared tensor, as safetensors stores tied weights."""
    seen, out = set(), {}
    for name, tensor in model.state_dict(keep_vars=False).items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        out[f"model.{name}"] = tensor.detach().clone().contiguous()
    return out


def main() -> int:
    import lerobot
    import transformers
    from lerobot.policies.xvla.modeling_xvla import XVLAModel

    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    inputs = _inputs(torch.Generator().manual_seed(SEEDS["inputs"]))
    expected: dict[str, torch.Tensor] = {}
    weights = None
    for space in SPACES:
        real = space.get("real_dim", 14)
        config = _config(space["action_mode"], real)
        torch.manual_seed(0)
        model = XVLAModel(config=config, florence_config=config.get_florence_config(), proprio_dim=STATE_DIM)
        _randomize(model, torch.Generator().manual_seed(SEEDS["weights"]))  # the same weights for each space
        model.eval()
        state = _state_dict(model)
        if weights is None:
            weights = state
            _debug(model, inputs, expected)
            with tempfile.TemporaryDirectory() as folder:
                config._save_pretrained(Path(folder))
                (OUT / "config.json").write_text((Path(folder) / "config.json").read_text())
        assert weights.keys() == state.keys() and all(torch.equal(weights[k], state[k]) for k in weights)
        _train(model, inputs, space["name"], expected)
        _sample(model, inputs, space["name"], expected)
        totals = {k.rsplit(".", 1)[-1]: round(float(v), 6) for k, v in expected.items()
                  if k.startswith(f"{space['name']}.train.loss.")}
        print(f"{space['name']}: losses {totals}")
    save_file(weights, str(OUT / "model.safetensors"))
    save_file({k: v.contiguous() for k, v in inputs.items() if k != "image_input"}, str(OUT / "inputs.safetensors"))
    save_file({k: v.contiguous() for k, v in expected.items()}, str(OUT / "expected.safetensors"))
    meta = {
        "reference": "lerobot 0.6.1 XVLAModel on transformers' native Florence2Model, eval mode, float32, CPU",
        "versions": {"lerobot": lerobot.__version__, "transformers": transformers.__version__,
                     "torch": torch.__version__, "python": platform.python_version()},
        "seeds": SEEDS, "batch_size": BATCH, "num_views": VIEWS, "image_hw": list(IMAGE_HW), "view_mask": VIEW_MASK,
        "text_len": TEXT_LEN, "text_valid_len": VALID_LEN, "domain_id": DOMAIN_ID, "state_dim": STATE_DIM,
        "real_state_dim": REAL_STATE, "action_spaces": SPACES, "sampling_steps": STEPS,
        "image_tokens_per_view": int(expected["debug.vlm.projector_out"].shape[1]),
    }
    (OUT / "fixture.json").write_text(json.dumps(meta, indent=1) + "\n")
    for path in sorted(OUT.iterdir()):
        print(f"{path.name}: {path.stat().st_size / 1024:.1f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
