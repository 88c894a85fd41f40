"""Writes ``tests/fixtures/groot_n1_7_text3/``: a second GR00T N1.7 action-head golden made with lerobot 0.6.1's own
``GR00TN17ActionHead`` at settings the shared fixture (``../shared/fixtures/groot_n1_7_lerobot``) does not use.

The shared fixture has a 4-block DiT of 4 x 12 with ``attend_text_every_n_blocks=2`` (blocks text / self / image /
self), 2 VL self-attention blocks, 1000 timestep buckets, 4 sampling steps, B = 2, no masked action steps. This one:

- a 6-block DiT of 2 heads x 8 = 16 with ``attend_text_every_n_blocks=3`` (text / self / image / self / image /
  self: the text cross-attention only in block 0), output 20 (= hidden_size), 1 VL self-attention block of
  2 x 8 = 16 (= backbone width);
- 3 embodiment slots (ids [0, 2, 1]), state 6 (4 real), actions 5 (3 real), horizon 6 with 3 data steps for one
  element (its action_mask zero past them), position table of 10 rows;
- 500 timestep buckets, 3 sampling steps (buckets 0, 166, 333), B = 3, 9 backbone tokens with per-element image
  spans and valid lengths.

Like the shared fixture: eval mode (dropout and state dropout off), float32, the training draws (noise, t) and the
sampling start injected and recorded, every weight re-drawn at unit scale (lerobot's 0.02 init of the category
specific layers makes the outputs nearly constant) and LayerNorm affines moved away from 1 / 0. Run from the
repository root (about 20 s)::

    PYTHONPATH=. .venv-lerobot/bin/python benchmarks/groot_n1_7_second_golden.py

Needs lerobot 0.6.1 and diffusers (``benchmarks/setup_lerobot_venv.sh``). Tolerance of the test: the shared
fixture's, atol = rtol = 1e-5.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "groot_n1_7_text3"
HEAD = {"backbone_embedding_dim": 16, "hidden_size": 20, "input_embedding_dim": 16, "max_state_dim": 6,
        "max_action_dim": 5, "action_horizon": 6, "max_num_embodiments": 3, "max_seq_len": 10,
        "attend_text_every_n_blocks": 3, "num_inference_timesteps": 3, "num_timestep_buckets": 500,
        "diffusion_model_cfg": {"positional_embeddings": None, "num_layers": 6, "num_attention_heads": 2,
                                "attention_head_dim": 8, "norm_type": "ada_norm", "dropout": 0.2,
                                "final_dropout": True, "output_dim": 20, "interleave_self_attention": True},
        "vl_self_attention_cfg": {"positional_embeddings": None, "num_layers": 1, "num_attention_heads": 2,
                                  "attention_head_dim": 8, "dropout": 0.2, "final_dropout": True}}
B, TOKENS, REAL_STATE, REAL_ACTION, DATA_STEPS = 3, 9, 4, 3, {1: 3}
IMAGE_SPANS, VALID = [(1, 5), (2, 7), (3, 6)], [9, 7, 8]
EMBODIMENT = [0, 2, 1]


def redraw(module: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            last = name.rsplit(".", 1)[-1]
            if last in ("b", "bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            elif p.dim() == 1:  # LayerNorm weights
                p.copy_(1 + torch.randn(p.shape, generator=g) * 0.25)
            elif last == "W":  # category-specific [slots, in, out]
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
            elif "position_embedding" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)


def inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    image = torch.zeros(B, TOKENS, dtype=torch.bool)
    valid = torch.zeros(B, TOKENS, dtype=torch.bool)
    for i, ((a, b), n) in enumerate(zip(IMAGE_SPANS, VALID, strict=True)):
        image[i, a:b] = True
        valid[i, :n] = True
    state = torch.zeros(B, 1, HEAD["max_state_dim"])
    state[..., :REAL_STATE] = torch.randn(B, 1, REAL_STATE, generator=g)
    mask = torch.zeros(B, HEAD["action_horizon"], HEAD["max_action_dim"])
    mask[:, :, :REAL_ACTION] = 1
    for i, steps in DATA_STEPS.items():
        mask[i, steps:] = 0
    action = torch.randn(B, HEAD["action_horizon"], HEAD["max_action_dim"], generator=g) * mask
    return {"backbone_features": torch.randn(B, TOKENS, HEAD["backbone_embedding_dim"], generator=g),
            "backbone_attention_mask": valid, "image_mask": image, "state": state, "action": action,
            "action_mask": mask, "embodiment_id": torch.tensor(EMBODIMENT),
            "noise": torch.randn(B, HEAD["action_horizon"], HEAD["max_action_dim"], generator=g),
            "t": (1 - torch.distributions.Beta(1.5, 1.0).sample((B,))) * 0.999,
            "sample_init_noise": torch.randn(B, HEAD["action_horizon"], HEAD["max_action_dim"], generator=g)}


def with_randn(value: torch.Tensor):
    """A context in which the next ``torch.randn`` call returns ``value`` (the head draws once per call)."""
    class _Patch:
        def __enter__(self):
            self.original = torch.randn
            torch.randn = lambda *args, **kwargs: value.clone()

        def __exit__(self, *exc):
            torch.randn = self.original

    return _Patch()


def main() -> None:
    from lerobot.policies.groot.groot_n1_7 import GR00T_N1_7_DEFAULTS, GR00TN17ActionHead, GR00TN17Config
    from transformers.feature_extraction_utils import BatchFeature

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = GR00TN17Config(**{**copy.deepcopy(GR00T_N1_7_DEFAULTS), **copy.deepcopy(HEAD)})
    head = GR00TN17ActionHead(config)
    redraw(head, seed=1)
    head.eval()
    torch.manual_seed(3)
    data = inputs()
    backbone = {k: data[k] for k in ("backbone_features", "backbone_attention_mask", "image_mask")}
    action_input = {k: data[k] for k in ("state", "action", "action_mask", "embodiment_id")}
    head.sample_time = lambda batch_size, device, dtype: data["t"].to(device, dtype)
    with torch.no_grad(), with_randn(data["noise"]):
        out = head(BatchFeature(data=dict(backbone)), BatchFeature(data=dict(action_input)))
    with with_randn(data["sample_init_noise"]):
        sample = head.get_action(BatchFeature(data=dict(backbone)),
                                 BatchFeature(data={k: v for k, v in action_input.items() if k != "action"}))
    expected = {"loss": out["loss"], "action_loss": out["action_loss"], "debug.vl_embeds": out["backbone_features"],
                "debug.state_features": out["state_features"], "action_pred": sample["action_pred"],
                "debug.t_bucket": (data["t"] * HEAD["num_timestep_buckets"]).long()}
    OUT.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(OUT / "model.safetensors"))
    save_file({k: v.contiguous() for k, v in data.items()}, str(OUT / "inputs.safetensors"))
    save_file({k: v.detach().contiguous() for k, v in expected.items()}, str(OUT / "expected.safetensors"))
    import diffusers
    import lerobot

    doc = {"reference": "lerobot 0.6.1 GR00TN17ActionHead (groot_n1_7.py + action_head/cross_attention_dit.py)",
           "generator": "benchmarks/groot_n1_7_second_golden.py", "lerobot_version": lerobot.__version__,
           "torch_version": torch.__version__, "diffusers_version": diffusers.__version__, "dtype": "float32",
           "mode": "eval (dropout and state dropout off)", "action_head_config": HEAD,
           "dit_block_kinds": ["cross_text", "self", "cross_image", "self", "cross_image", "self"],
           "batch_size": B, "backbone_seq_len": TOKENS, "image_spans": IMAGE_SPANS, "valid_len": VALID,
           "embodiment_id": EMBODIMENT, "real_state_dim": REAL_STATE, "real_action_dim": REAL_ACTION,
           "data_steps": DATA_STEPS, "sampling_step_buckets": [int(k / 3 * 500) for k in range(3)]}
    (OUT / "config.json").write_text(json.dumps(doc, indent=2) + "\n")
    size = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({size / 1024:.0f} KB): loss {float(out['loss']):.6f}, |action_pred| max "
          f"{float(sample['action_pred'].abs().max()):.3f}")


if __name__ == "__main__":
    main()
