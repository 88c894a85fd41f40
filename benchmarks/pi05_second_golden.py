"""Writes ``tests/fixtures/pi05_gqa_patch7/``: a second pi0.5 golden made with lerobot 0.6.1's own ``PI05Pytorch`` at
a setting the shared fixture (``../shared/fixtures/pi05_lerobot``) does not have.

Run it in the lerobot side venv (lerobot 0.6.1, transformers 5.5.4, torch 2.13 CPU)::

    PYTHONPATH=. .venv-lerobot/bin/python benchmarks/pi05_second_golden.py

What differs from the shared fixture (VLM 64 x 2 layers with 8 heads on 1 KV head, 2 cameras of 28 px at patch 14,
4 image tokens each, 16 language tokens, chunk 10, 10 Euler steps, periods 0.004 / 4.0):

- grouped-query attention with 8 query heads on 2 KV heads (head_dim 4) in 3 layers (lerobot 0.6.1 hard-codes 8 query
  heads in ``compute_layer_complete``); VLM 32 wide (GeGLU 48), expert 16 wide (GeGLU 32) with adaRMS;
- SigLIP 16 wide with one layer and 2 heads at patch 7: 3 cameras of 28 px, 16 tokens each, camera 2 absent for one
  element and camera 1 for another;
- 11 language tokens (valid lengths 11, 7, 4), chunk 6, ``max_action_dim`` 12 (5 real), 4 Euler steps, time
  embedding periods 0.01 / 2.0, B = 3.

lerobot hard-codes its two Gemma variants and PaliGemma's vision sizes; as ``benchmarks/pi05_vs_lerobot.py`` does, its
``get_gemma_config`` and the two model classes are wrapped so that the variant names build these sizes. Writes
``model.safetensors`` (``PI05Pytorch.state_dict()``), ``inputs.safetensors``, ``expected.safetensors``,
``fixture.json`` (sizes, layout, seeds, versions) and ``lerobot_config.json`` (``PI05Config._save_pretrained``: the
fields lerobot records; its variant names stand for the released sizes, not these, so it is not named
``config.json``, which the loader would read as the checkpoint's description). Random weights: matrices
N(0, 1/fan_in), vectors N(0, 0.1^2), RMSNorm / adaRMS weights N(0, 0.2^2) (Gemma scales by 1 + w), LayerNorm
1 + N(0, 0.2^2) / N(0, 0.1^2), token embeddings N(0, 1), position embeddings N(0, 0.5^2).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "pi05_gqa_patch7"
SEEDS = {"build": 0, "weights": 31, "inputs": 32}
SIZES = {"vlm_width": 32, "vlm_mlp": 48, "expert_width": 16, "expert_mlp": 32, "depth": 3, "heads": 8, "kv_heads": 2,
         "head_dim": 4, "vision_width": 16, "vision_depth": 1, "vision_mlp": 32, "vision_heads": 2, "patch": 7,
         "image": 28, "vocab": 64}
BATCH, CAMERAS, TEXT_LEN, VALID_LEN = 3, 3, 11, (11, 7, 4)
CAMERA_MASK = ((True, True, False), (True, True, True), (True, False, True))
CHUNK, MAX_ACTION, REAL_ACTION, STEPS = 6, 12, 5, 4
POLICY = dict(paligemma_variant="gemma_2b", action_expert_variant="gemma_300m", dtype="float32", chunk_size=CHUNK,
              n_action_steps=CHUNK, max_action_dim=MAX_ACTION, max_state_dim=16, num_inference_steps=STEPS,
              min_period=0.01, max_period=2.0, image_resolution=(SIZES["image"], SIZES["image"]),
              tokenizer_max_length=TEXT_LEN, device="cpu", push_to_hub=False)


def _lerobot_model() -> Any:
    """PI05Pytorch with the variant names building SIZES (lerobot hard-codes the released sizes)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lerobot.policies.pi05 import modeling_pi05 as mp
    from lerobot.policies.pi05.configuration_pi05 import PI05Config

    def gemma(variant: str) -> Any:
        width, mlp = ((SIZES["vlm_width"], SIZES["vlm_mlp"]) if variant == "gemma_2b"
                      else (SIZES["expert_width"], SIZES["expert_mlp"]))
        return mp.GemmaConfig(width=width, depth=SIZES["depth"], mlp_dim=mlp, num_heads=SIZES["heads"],
                              num_kv_heads=SIZES["kv_heads"], head_dim=SIZES["head_dim"])

    vlm_class, expert_class = mp.PaliGemmaForConditionalGenerationWithPiGemma, mp.PiGemmaForCausalLM

    def vlm(config: Any) -> Any:
        vision = config.vision_config
        vision.hidden_size, vision.num_hidden_layers = SIZES["vision_width"], SIZES["vision_depth"]
        vision.intermediate_size, vision.num_attention_heads = SIZES["vision_mlp"], SIZES["vision_heads"]
        vision.patch_size, vision.projection_dim = SIZES["patch"], SIZES["vlm_width"]
        config.text_config.vocab_size = config._vocab_size = SIZES["vocab"]
        config.image_token_index = SIZES["vocab"]
        return vlm_class(config=config)

    def expert(config: Any) -> Any:
        config.vocab_size = SIZES["vocab"]
        return expert_class(config=config)

    mp.get_gemma_config, mp.PaliGemmaForConditionalGenerationWithPiGemma, mp.PiGemmaForCausalLM = gemma, vlm, expert
    config = PI05Config(**POLICY)
    return mp.PI05Pytorch(config), config


def _randomize(model: torch.nn.Module, generator: torch.Generator) -> None:
    def normal(param: torch.Tensor, std: float, mean: float = 0.0) -> None:
        param.copy_(torch.randn(param.shape, generator=generator) * std + mean)

    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_tokens" in name:
                normal(param, 1.0)
            elif "position_embedding" in name:
                normal(param, 0.5)
            elif param.ndim >= 2:
                normal(param, 1 / param[0].numel() ** 0.5)
            elif "vision_tower" in name and ("layer_norm" in name or "layernorm" in name):
                normal(param, 0.2, 1.0) if name.endswith("weight") else normal(param, 0.1)
            elif "norm" in name and name.endswith("weight"):
                normal(param, 0.2)  # Gemma's RMSNorm multiplies by (1 + weight)
            else:
                normal(param, 0.1)


def _inputs(generator: torch.Generator) -> dict[str, torch.Tensor]:
    out = {}
    mask = torch.tensor(CAMERA_MASK)
    for i in range(CAMERAS):
        # pixel levels k / 255 (stored as uint8), mapped to [-1, 1] as PI05Policy's preprocessing does
        out[f"image_levels.cam{i}"] = torch.randint(0, 256, (BATCH, 3, SIZES["image"], SIZES["image"]),
                                                    generator=generator, dtype=torch.uint8)
        out[f"image_mask.cam{i}"] = mask[:, i].clone()
    tokens = torch.randint(1, SIZES["vocab"], (BATCH, TEXT_LEN), generator=generator)
    lang_mask = torch.arange(TEXT_LEN)[None] < torch.tensor(VALID_LEN)[:, None]
    out["lang_tokens"] = tokens * lang_mask
    out["lang_mask"] = lang_mask
    actions = torch.zeros(BATCH, CHUNK, MAX_ACTION)
    actions[..., :REAL_ACTION] = torch.randn((BATCH, CHUNK, REAL_ACTION), generator=generator)
    out.update(actions=actions, noise=torch.randn((BATCH, CHUNK, MAX_ACTION), generator=generator),
               time=torch.rand((BATCH,), generator=generator) * 0.999 + 0.001)
    return out


def main() -> int:
    import lerobot
    import transformers

    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEEDS["build"])
    model, config = _lerobot_model()
    _randomize(model, torch.Generator().manual_seed(SEEDS["weights"]))
    model.eval()
    inputs = _inputs(torch.Generator().manual_seed(SEEDS["inputs"]))
    images = [inputs[f"image_levels.cam{i}"].float() / 255.0 * 2.0 - 1.0 for i in range(CAMERAS)]
    masks = [inputs[f"image_mask.cam{i}"] for i in range(CAMERAS)]
    with torch.no_grad():
        loss = model(images, masks, inputs["lang_tokens"], inputs["lang_mask"], inputs["actions"], inputs["noise"],
                     inputs["time"])
        sampled = model.sample_actions(images, masks, inputs["lang_tokens"], inputs["lang_mask"],
                                       noise=inputs["noise"], num_steps=STEPS)
        embs, pad, att = model.embed_prefix(images, masks, inputs["lang_tokens"], inputs["lang_mask"])
        t = inputs["time"][:, None, None]
        x_t = t * inputs["noise"] + (1 - t) * inputs["actions"]
        suffix, _, _, cond = model.embed_suffix(x_t, inputs["time"])
    expected = {"loss": loss, "sampled_actions": sampled, "debug.prefix_embs": embs, "debug.prefix_pad_mask": pad,
                "debug.prefix_att_mask": att.long(), "debug.suffix_embs": suffix, "debug.adarms_cond": cond}
    save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
              str(OUT / "model.safetensors"))
    save_file({k: v.contiguous() for k, v in inputs.items()}, str(OUT / "inputs.safetensors"))
    save_file({k: v.contiguous() for k, v in expected.items()}, str(OUT / "expected.safetensors"))
    with tempfile.TemporaryDirectory() as folder:
        config._save_pretrained(Path(folder))
        (OUT / "lerobot_config.json").write_text((Path(folder) / "config.json").read_text())
    meta = {
        "reference": "lerobot 0.6.1 PI05Pytorch, eval mode, float32, CPU, one thread; get_gemma_config and the two "
                     "model classes wrapped to build these sizes",
        "versions": {"lerobot": lerobot.__version__, "transformers": transformers.__version__,
                     "torch": torch.__version__, "python": platform.python_version()},
        "seeds": SEEDS, "sizes": SIZES, "batch_size": BATCH, "num_cameras": CAMERAS, "camera_mask": CAMERA_MASK,
        "text_len": TEXT_LEN, "text_valid_len": VALID_LEN, "chunk_size": CHUNK, "max_action_dim": MAX_ACTION,
        "max_state_dim": POLICY["max_state_dim"], "real_action_dim": REAL_ACTION, "num_inference_steps": STEPS,
        "min_period": POLICY["min_period"], "max_period": POLICY["max_period"],
        "rms_norm_eps": model.paligemma_with_expert.paligemma.config.text_config.rms_norm_eps,
        "vision_layer_norm_eps": model.paligemma_with_expert.paligemma.config.vision_config.layer_norm_eps,
    }
    (OUT / "fixture.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"loss mean {loss[..., :REAL_ACTION].mean():.6f}, max |sampled| {sampled.abs().max():.4f}")
    for path in sorted(OUT.iterdir()):
        print(f"{path.name}: {path.stat().st_size / 1024:.1f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
