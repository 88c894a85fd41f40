"""Writes ``tests/fixtures/groot_n1_6_sizes/``: a second GR00T N1.6 golden made with LoongForge's own ``groot_n1_6``
code at sizes the shared fixture (``../shared/fixtures/groot_n1_6_loongforge``) does not have.

Run it in the lerobot side venv (torch 2.13 CPU, transformers 5.5.4, diffusers 0.39) against a LoongForge checkout at
``c6275661`` (only ``loongforge/embodied/model/groot_n1_6/`` is imported; nothing of it is copied here)::

    PYTHONPATH=. .venv-lerobot/bin/python benchmarks/groot_n1_6_second_golden.py --loongforge /path/to/LoongForge

The CPU shims are the shared fixture's (its ``config.json`` lists them): bare packages stand in for LoongForge's
package ``__init__`` files and stub modules for the data-pipeline imports ``modeling_groot_n1_6.py`` makes at module
level (unused by ``forward`` and the sampling loop); flash-attn's varlen kernel, the only SigLIP2 attention LoongForge
implements correctly, is replaced by per-segment SDPA over the same ``cu_seqlens`` (block-diagonal attention, same
math); ``CUDA_GRAPH_IMPL=local`` / ``CUDA_GRAPH_SCOPE=per_microbatch`` make ``EagleBackbone`` build LoongForge's own
``Eagle3VlForConditionalGeneration`` from a local tiny ``config.json`` (no CUDA graph is captured on CPU).

What differs from the shared fixture: SigLIP2 24 wide (2 heads x 12), 3 layers with the full-attention layer last
(index 2), window 3 (partial tiles on every grid), patch 4, a 5 x 5 position table resized to 4 x 6 / 2 x 4 / 6 x 2 /
4 x 4 grids; Qwen3 32 wide (4 heads x 8, 2 KV heads), MLP 56, RoPE theta 500, 5 layers built and ``select_layer`` 3
kept; DiT 4 blocks of 2 x 12, output 20; state 10, action 9, horizon 12, position table 20 rows, 3 embodiments; a
batch of 3 with 2 / 1 / 2 images (one element with two same-size images), left padding 0 / 5 / 1; 5 sampling steps
(buckets 0, 200, 400, 600, 800). Random weights follow the shared fixture's scheme (Linear / category-specific
N(0, 1/fan_in), biases 0.1 N(0, 1), embeddings N(0, 1), the action position table 0.5 N(0, 1), norms 1 + 0.2 N(0, 1)
with biases 0.2 N(0, 1)), rounded to float16 so that ``model.safetensors`` stores them exactly in half the bytes.
Images are stored as uint8 (the model's ``(x / 255 - 0.5) / 0.5`` is the reference processor's, done here the same
way). Prints the sizes of what it wrote and the losses.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import types
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "groot_n1_6_sizes"
REFERENCE_COMMIT = "c6275661846a9a3f39ce855f22a3f6944fc30e90"
SEEDS = {"weights": 0, "inputs": 1, "train_draws": 2, "sample_draws": 3}
VISION = {"model_type": "siglip2_vision_model", "hidden_size": 24, "intermediate_size": 40, "num_hidden_layers": 3,
          "num_attention_heads": 2, "num_patches": 25, "patch_size": 4, "window_size": 3, "full_attention_indexes": [2],
          "use_rope": True, "use_windows_attn": True, "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6}
TEXT = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 32, "intermediate_size": 56,
        "num_hidden_layers": 5, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 96,
        "max_position_embeddings": 128, "rope_theta": 500.0, "rms_norm_eps": 1e-6, "hidden_act": "silu",
        "tie_word_embeddings": False}
IMAGE_TOKEN, IMG_START, IMG_END, PAD = 90, 87, 88, 1
EAGLE = {"model_type": "eagle_3_vl", "select_layer": -1, "downsample_ratio": 0.5, "image_token_index": IMAGE_TOKEN,
         "vision_config": VISION, "text_config": TEXT}
MODEL = {"action_dim": 5, "state_dim": 6, "action_horizon": 12, "max_action_dim": 9, "max_state_dim": 10,
         "hidden_size": 20, "input_embedding_dim": 24, "backbone_embedding_dim": 32, "select_layer": 3,
         "max_seq_len": 20, "max_num_embodiments": 3, "num_inference_timesteps": 5, "attend_text_every_n_blocks": 2,
         "diffusion_model_cfg": {"positional_embeddings": None, "num_layers": 4, "num_attention_heads": 2,
                                 "attention_head_dim": 12, "norm_type": "ada_norm", "dropout": 0.2,
                                 "final_dropout": True, "output_dim": 20, "interleave_self_attention": True},
         "use_flash_attention": True, "load_bf16": False, "use_bf16": False, "tune_top_llm_layers": 0}
IMAGES = (((16, 24), (8, 16)), ((24, 8),), ((16, 16), (16, 16)))
TEXT_AROUND = ((3, 2), (4, 3), (2, 2))
EMBODIMENT = (2, 0, 1)
MASKED_TAIL = {1: 4}


def _bare(name: str, path: Path | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [str(path)]
    sys.modules[name] = module
    return module


def _install_shims(root: Path) -> None:
    """Bare LoongForge packages, stubs for the data-side imports, and the env that selects the local Eagle model."""
    lf = root / "loongforge"
    for name, path in (("loongforge", lf), ("loongforge.embodied", lf / "embodied"),
                       ("loongforge.embodied.model", lf / "embodied" / "model"),
                       ("loongforge.embodied.train", lf / "embodied" / "train"),
                       ("loongforge.embodied.data", None), ("loongforge.embodied.data.datasets", None),
                       ("loongforge.embodied.data.datasets.groot_n1_6", None),
                       ("loongforge.embodied.data.datasets.groot_n1_6.transforms", None),
                       ("loongforge.embodied.data.datasets.groot_n1_6.transforms.eagle3_model", None)):
        _bare(name, path)
    transforms = "loongforge.embodied.data.datasets.groot_n1_6.transforms"
    processor = _bare(f"{transforms}.processor_groot_n1_6")
    processor.Gr00tN1d6DataCollator = processor.StateActionProcessor = object  # unused by forward and sampling
    utils = _bare(f"{transforms}.utils")
    utils.EMBODIMENT_STAT_CONFIGS, utils.EMBODIMENT_TAG_TO_PROJECTOR_INDEX, utils.MODALITY_CONFIGS = {}, {}, {}
    utils.convert_lerobot_stats_to_processor_format = None
    augment = _bare(f"{transforms}.eagle3_model.image_augmentations")
    augment.build_image_transformations_albumentations = None
    os.environ["CUDA_GRAPH_IMPL"], os.environ["CUDA_GRAPH_SCOPE"] = "local", "per_microbatch"
    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"


def _segment_sdpa(q, k, v, *, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                  softmax_scale=None, causal=False, **_):
    """flash_attn_varlen_func on CPU: attention within each [cu[i], cu[i+1]) segment ([T, heads, D] in and out)."""
    out = torch.empty_like(q)
    bounds = cu_seqlens_q.tolist()
    for start, end in itertools.pairwise(bounds):
        seg = [x[start:end].transpose(0, 1)[None] for x in (q, k, v)]
        out[start:end] = F.scaled_dot_product_attention(*seg, scale=softmax_scale, is_causal=causal)[0].transpose(0, 1)
    return out


def _redraw(model: nn.Module, seed: int) -> None:
    """Every parameter re-drawn (the shared fixture's scheme), then rounded to float16."""
    g = torch.Generator().manual_seed(seed)
    norms = {id(m) for m in model.modules() if isinstance(m, nn.LayerNorm) or "RMSNorm" in type(m).__name__}
    owner = {id(p): m for m in model.modules() for p in m.parameters(recurse=False)}
    with torch.no_grad():
        for name, p in model.named_parameters():
            n = torch.randn(p.shape, generator=g)
            module = owner[id(p)]
            if id(module) in norms:
                value = 1 + 0.2 * n if name.endswith("weight") else 0.2 * n
            elif name.endswith(".W"):
                value = n / p.shape[1] ** 0.5
            elif name.endswith(".b") or name.endswith("bias"):
                value = 0.1 * n
            elif isinstance(module, nn.Embedding):
                value = 0.5 * n if name == "action_head.position_embedding.weight" else n
            elif p.ndim >= 2:
                value = n / p.shape[-1] ** 0.5
            else:
                value = n
            p.copy_(value.half().float())


def _inputs(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    rows, images = [], []
    for sizes, (before, after) in zip(IMAGES, TEXT_AROUND, strict=True):
        ids = torch.randint(2, 80, (before,), generator=g).tolist()
        for h, w in sizes:
            images.append(torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8))
            tokens = (h // (2 * VISION["patch_size"])) * (w // (2 * VISION["patch_size"]))
            ids += [IMG_START] + [IMAGE_TOKEN] * tokens + [IMG_END]
        rows.append(ids + torch.randint(2, 80, (after,), generator=g).tolist())
    length = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), length), PAD, dtype=torch.long)
    attention = torch.zeros(len(rows), length, dtype=torch.long)
    for i, r in enumerate(rows):
        input_ids[i, length - len(r):] = torch.tensor(r)
        attention[i, length - len(r):] = 1
    batch, horizon = len(rows), MODEL["action_horizon"]
    state = torch.zeros(batch, 1, MODEL["max_state_dim"])
    state[..., : MODEL["state_dim"]] = torch.randn(batch, 1, MODEL["state_dim"], generator=g)
    action = torch.zeros(batch, horizon, MODEL["max_action_dim"])
    action[..., : MODEL["action_dim"]] = torch.rand(batch, horizon, MODEL["action_dim"], generator=g) * 2 - 1
    mask = torch.zeros_like(action)
    mask[..., : MODEL["action_dim"]] = 1
    for row, tail in MASKED_TAIL.items():
        mask[row, -tail:] = 0
    out = {"input_ids": input_ids, "attention_mask": attention, "state": state, "action": action, "action_mask": mask,
           "embodiment_id": torch.tensor(EMBODIMENT)}
    out.update({f"images.{i}": image for i, image in enumerate(images)})
    return out


def _pixels(inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The processor's pixel path: ``(u8 / 255 - 0.5) / 0.5`` in float32, one [1, 3, H, W] per image."""
    count = sum(1 for k in inputs if k.startswith("images."))
    return [((inputs[f"images.{i}"].float() * (1.0 / 255.0) - 0.5) / 0.5)[None] for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loongforge", type=Path, required=True, help="LoongForge checkout at " + REFERENCE_COMMIT)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    _install_shims(args.loongforge.resolve())
    import diffusers
    import transformers
    from loongforge.embodied.model.groot_n1_6.eagle3_model import modeling_siglip2
    from loongforge.embodied.model.groot_n1_6.model_configuration_groot_n1_6 import GrootN1d6ModelConfig
    from loongforge.embodied.model.groot_n1_6.modeling_groot_n1_6 import Gr00tN1d6, GrootN1d6Policy

    modeling_siglip2.flash_attn_varlen_func = _segment_sdpa
    modeling_siglip2._flash_supports_window_size = False
    with tempfile.TemporaryDirectory() as tmp:
        eagle_dir = Path(tmp) / "tiny-eagle3"
        eagle_dir.mkdir()
        (eagle_dir / "config.json").write_text(json.dumps(EAGLE))
        config = GrootN1d6ModelConfig.from_config({**MODEL, "model_name": str(eagle_dir),
                                                   "vlm_tokenizer_path": str(eagle_dir)})
        torch.manual_seed(SEEDS["weights"])
        model = Gr00tN1d6(config).eval()
    eagle = model.backbone.model
    eagle.vision_model.config._attn_implementation = "flash_attention_2"  # the packed varlen path (shimmed above)
    assert len(eagle.language_model.model.layers) == MODEL["select_layer"]
    _redraw(model, SEEDS["weights"])

    inputs = _inputs(SEEDS["inputs"])
    feed = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"],
            "pixel_values": _pixels(inputs), "state": inputs["state"], "action": inputs["action"],
            "action_mask": inputs["action_mask"], "embodiment_id": inputs["embodiment_id"]}
    captured: dict[str, torch.Tensor] = {}

    def keep(name, read):
        def hook(module, args, output):  # returns None: the module's output stays as it is
            captured.setdefault(name, read(output))
        return hook

    hooks = [eagle.vision_model.register_forward_hook(keep("vision", lambda o: o.last_hidden_state)),
             eagle.mlp1.register_forward_hook(keep("vit_embeds", lambda o: o)),
             model.backbone.register_forward_hook(keep("features", lambda o: o["backbone_features"])),
             model.action_head.vlln.register_forward_hook(keep("vl_embeds", lambda o: o)),
             model.action_head.action_decoder.register_forward_hook(keep("decoded", lambda o: o))]

    g = torch.Generator().manual_seed(SEEDS["train_draws"])
    noise = torch.randn(inputs["action"].shape, generator=g)
    t = (1 - torch.distributions.Beta(1.5, 1.0).sample((3,))) * 0.999
    head = model.action_head
    head._split_noise_buf, head._split_time_buf = noise, t  # the head's own injection points for its draws
    with torch.no_grad():
        out = model(dict(feed))
    head._split_noise_buf = head._split_time_buf = None
    for hook in hooks:
        hook.remove()

    torch.manual_seed(SEEDS["sample_draws"])
    sample_init = torch.randn(3, MODEL["action_horizon"], MODEL["max_action_dim"])
    torch.manual_seed(SEEDS["sample_draws"])  # the loop's own torch.randn draws sample_init again
    policy = SimpleNamespace(model=model, _ensure_predict_action_collator=lambda: None, _predict_action_use_bf16=False,
                             _to_embodiment_tensor=GrootN1d6Policy._to_embodiment_tensor)
    sample_feed = {k: feed[k] for k in ("input_ids", "attention_mask", "pixel_values", "state", "embodiment_id")}
    pred = GrootN1d6Policy._sample_normalized_actions(policy, sample_feed)

    horizon = MODEL["action_horizon"]
    expected = {"vision_tokens": captured["vision"], "vit_embeds": captured["vit_embeds"],
                "backbone_features": captured["features"], "vl_embeds": captured["vl_embeds"],
                "pred_velocity": captured["decoded"][:, -horizon:], "action_loss": out["action_loss"],
                "loss": out["loss"], "state_features": out["state_features"], "action_pred": pred,
                "t_bucket": (t * 1000).long()}
    args.out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.half().contiguous() for k, v in model.state_dict().items()}, str(args.out / "model.safetensors"))
    save_file({**{k: v.contiguous() for k, v in inputs.items()}, "noise": noise, "t": t,
               "sample_init_noise": sample_init}, str(args.out / "inputs.safetensors"))
    save_file({k: v.detach().float().contiguous() if v.is_floating_point() else v.contiguous()
               for k, v in expected.items()}, str(args.out / "expected.safetensors"))
    doc = {"reference": "baidu-baige/LoongForge loongforge/embodied/model/groot_n1_6 (Gr00tN1d6.forward, "
                        "GrootN1d6Policy._sample_normalized_actions)", "reference_commit": REFERENCE_COMMIT,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "diffusers": diffusers.__version__, "python": platform.python_version()},
           "model_config": MODEL, "eagle_config": EAGLE, "seeds": SEEDS, "images_hw": IMAGES,
           "text_around_images": TEXT_AROUND, "embodiment_id": EMBODIMENT, "masked_tail_steps": MASKED_TAIL,
           "token_ids": {"image": IMAGE_TOKEN, "img_start": IMG_START, "img_end": IMG_END, "pad": PAD},
           "weights_dtype": "float16 (exact: drawn, then rounded to float16 before the reference ran)",
           "generator": "benchmarks/groot_n1_6_second_golden.py"}
    (args.out / "config.json").write_text(json.dumps(doc, indent=1) + "\n")
    for path in sorted(args.out.iterdir()):
        print(f"{path.name:24s} {path.stat().st_size / 1024:7.1f} KiB")
    print(f"loss {float(out['loss']):.6f}; action_pred |max| {pred.abs().max():.3f}")


if __name__ == "__main__":
    main()
