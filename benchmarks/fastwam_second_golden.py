"""Writes ``tests/fixtures/fastwam_h3_noproprio/``: a second FastWAM golden made with lerobot 0.6.1's own code at
settings the shared fixture (``../shared/fixtures/fastwam_lerobot``) does not use.

The shared fixture has 2 heads x 16, 2 layers, patch (1, 2, 2), a proprio token, an all-True context mask, shifts
5/5, 1000 training timesteps, lambdas 1/1 and injected per-element sampling noise. This one changes all of them:

- 3 heads x 8 (a 4-pair RoPE head: frame/height/width = 2/1/1 pairs), 3 MoT layers, video width 24 (FFN 32, freq 8),
  action width 16 (FFN 24, freq 10; q/k/v project 16 -> 24), text width 12, eps 1e-5, latent channels 4;
- patch (1, 1, 2): 4 latent frames of 3 x 4 -> 3 x 2 = 6 tokens per frame, 24 video tokens; horizon 12, action
  width 5, B = 2;
- ``proprio_dim=None`` (no proprio token: lerobot's switch, ``model.use_proprio=false`` here);
- a context mask with False keys (element 1: its last 2 of 5 tokens), context zeroed there;
- video shifts 3.0 (train) / 2.5 (infer), action shifts 7.0 / 2.0, 500 training timesteps, lambda_video 0.5,
  lambda_action 2.0, 3 sampling steps;
- the initial sampling noise drawn by lerobot itself from ``inference_seed`` 7 (one CPU generator per call, so both
  elements start from the same noise: lerobot's ``FastWAMPolicy`` semantics, ``model.inference_seed=7`` here);
- a second training case with ``video_attention_mask_mode=per_frame_causal`` (training only: lerobot's
  ``infer_action`` requires first_frame_causal).

Like the shared fixture, the VAE is a stub returning given latents and the text encoder is absent (``context`` is
an input); every weight is re-drawn at unit scale so no output is near constant; the training draws (video noise,
video u, action noise, action u) are those of ``torch.manual_seed(train_seed)`` in lerobot's order, recorded.

Run from the repository root (about 20 s, mostly lerobot's imports)::

    PYTHONPATH=. .venv-lerobot/bin/python benchmarks/fastwam_second_golden.py

It needs lerobot 0.6.1 and diffusers (``benchmarks/setup_lerobot_venv.sh``). Tolerance of the test: the shared
fixture's, atol = rtol = 1e-5.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fastwam_h3_noproprio"
B, RAW_FRAMES, LATENT_HW, HORIZON, ACTION_DIM, CONTEXT_LEN = 2, 13, (3, 4), 12, 5, 5
VIDEO = {"patch_size": [1, 1, 2], "in_dim": 4, "hidden_dim": 24, "ffn_dim": 32, "freq_dim": 8, "text_dim": 12,
         "out_dim": 4, "num_heads": 3, "attn_head_dim": 8, "num_layers": 3, "eps": 1e-5, "seperated_timestep": True,
         "use_gradient_checkpointing": False, "video_attention_mask_mode": "first_frame_causal",
         "action_conditioned": False, "action_dim": ACTION_DIM, "action_group_causal_mask_mode": "group_diagonal",
         "fp32_attention": True}
ACTION = {"action_dim": ACTION_DIM, "hidden_dim": 16, "ffn_dim": 24, "num_heads": 3, "attn_head_dim": 8,
          "num_layers": 3, "text_dim": 12, "freq_dim": 10, "eps": 1e-5, "use_gradient_checkpointing": False,
          "fp32_attention": True}
SCHEDULES = {"video_train_shift": 3.0, "video_infer_shift": 2.5, "video_num_train_timesteps": 500,
             "action_train_shift": 7.0, "action_infer_shift": 2.0, "action_num_train_timesteps": 500,
             "loss_lambda_video": 0.5, "loss_lambda_action": 2.0}
NUM_STEPS, INFERENCE_SEED, TRAIN_SEED = 3, 7, 5
CONTEXT_VALID = [5, 3]
IMAGE_PAD = {0: list(range(9, 13)), 1: [11, 12]}  # element 0: latent frame 3 padded; element 1: none (partial group)
ACTION_PAD = {0: [9, 10, 11]}


class StubVAE(nn.Module):
    """Returns the latents it is given (``latents``), with the real Wan2.2 VAE's temporal factor."""

    temporal_downsample_factor = 4
    upsampling_factor = 16
    z_dim = VIDEO["in_dim"]

    def __init__(self) -> None:
        super().__init__()
        self.latents: torch.Tensor | None = None

    def encode(self, videos, device=None, tiled=False, tile_size=None, tile_stride=None):
        del device, tiled, tile_size, tile_stride
        return self.latents.clone()


def redraw(module: nn.Module, seed: int) -> None:
    """Unit-scale random weights (lerobot's init zeroes heads and biases, which hides errors)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("modulation"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + torch.randn(p.shape, generator=g) * 0.25)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                p.copy_(torch.randn(p.shape, generator=g) / fan_in**0.5)


def build(video_cfg: dict, vae: StubVAE):
    from lerobot.policies.fastwam.wan import ActionDiT, FastWAM, MoT, WanVideoDiT

    torch.manual_seed(0)
    video, action = WanVideoDiT(**video_cfg), ActionDiT(**ACTION)
    mot = MoT(mixtures={"video": video, "action": action}, mot_checkpoint_mixed_attn=False)
    model = FastWAM(video_expert=video, action_expert=action, mot=mot, vae=vae, text_dim=VIDEO["text_dim"],
                    proprio_dim=None, device="cpu", torch_dtype=torch.float32, **SCHEDULES)
    return model


def make_inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    f = (RAW_FRAMES - 1) // 4 + 1
    context = torch.randn(B, CONTEXT_LEN, VIDEO["text_dim"], generator=g)
    mask = torch.ones(B, CONTEXT_LEN, dtype=torch.bool)
    for i, n in enumerate(CONTEXT_VALID):
        context[i, n:] = 0
        mask[i, n:] = False
    image_is_pad = torch.zeros(B, RAW_FRAMES, dtype=torch.bool)
    for i, frames in IMAGE_PAD.items():
        image_is_pad[i, frames] = True
    action_is_pad = torch.zeros(B, HORIZON, dtype=torch.bool)
    for i, steps in ACTION_PAD.items():
        action_is_pad[i, steps] = True
    latents = torch.randn(B, VIDEO["in_dim"], f, *LATENT_HW, generator=g)
    return {"context": context, "context_mask": mask, "train.latents": latents,
            "train.action": torch.randn(B, HORIZON, ACTION_DIM, generator=g), "train.action_is_pad": action_is_pad,
            "train.image_is_pad": image_is_pad, "sample.first_frame_latents": latents[:, :, :1].clone()}


def training_case(model, vae: StubVAE, inputs: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """lerobot's ``training_loss`` under ``torch.manual_seed(TRAIN_SEED)`` with its draws and outputs captured."""
    captured: dict[str, torch.Tensor] = {}
    run_mot, video_loss, action_loss = model._run_training_mot, model._compute_training_video_loss, \
        model._compute_training_action_loss
    sample_targets = model._sample_training_targets

    def targets_hook(inputs_):
        out = sample_targets(inputs_)
        captured.update({"t_video": out["timestep_video"], "t_action": out["timestep_action"],
                         "noisy_video": out["latents"], "noisy_action": out["noisy_action"]})
        return out

    def mot_hook(**kwargs):
        pred_video, pred_action = run_mot(**kwargs)
        captured.update(pred_video=pred_video, pred_action=pred_action)
        return pred_video, pred_action

    def video_hook(**kwargs):
        captured["loss_video"] = video_loss(**kwargs)
        return captured["loss_video"]

    def action_hook(**kwargs):
        captured["loss_action"] = action_loss(**kwargs)
        return captured["loss_action"]

    model._sample_training_targets, model._run_training_mot = targets_hook, mot_hook
    model._compute_training_video_loss, model._compute_training_action_loss = video_hook, action_hook
    draws = []
    randn_like, rand = torch.randn_like, torch.rand

    def record(fn):
        def wrapped(*args, **kwargs):
            draws.append(fn(*args, **kwargs))
            return draws[-1]
        return wrapped

    vae.latents = inputs["train.latents"]
    sample = {"video": torch.zeros(B, 3, RAW_FRAMES, 16 * LATENT_HW[0], 16 * LATENT_HW[1]),
              "context": inputs["context"], "context_mask": inputs["context_mask"], "action": inputs["train.action"],
              "action_is_pad": inputs["train.action_is_pad"], "image_is_pad": inputs["train.image_is_pad"]}
    torch.randn_like, torch.rand = record(randn_like), record(rand)
    try:
        torch.manual_seed(TRAIN_SEED)
        loss, _ = model.training_loss(sample)
    finally:
        torch.randn_like, torch.rand = randn_like, rand
    if len(draws) != 4:
        sys.exit(f"expected 4 draws in training_loss, lerobot made {len(draws)}")
    out = {f"{prefix}.loss": loss.detach()}
    out.update({f"{prefix}.{k}": v.detach() for k, v in captured.items()})
    out.update({f"{prefix}.{k}": v for k, v in zip(("noise_video", "u_video", "noise_action", "u_action"), draws,
                                                   strict=True)})
    return out


def sampling_case(model, vae: StubVAE, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``infer_action`` per element (as ``FastWAMPolicy.predict_action_chunk``), noise from ``INFERENCE_SEED``."""
    actions = []
    for i in range(B):
        vae.latents = inputs["sample.first_frame_latents"][i:i + 1]
        out = model.infer_action(prompt=None, input_image=torch.zeros(3, 16 * LATENT_HW[0], 16 * LATENT_HW[1]),
                                 action_horizon=HORIZON, proprio=None, context=inputs["context"][i:i + 1],
                                 context_mask=inputs["context_mask"][i:i + 1], num_inference_steps=NUM_STEPS,
                                 sigma_shift=None, seed=INFERENCE_SEED, rand_device="cpu")
        actions.append(out["action"])
    init = torch.randn((1, HORIZON, ACTION_DIM), generator=torch.Generator("cpu").manual_seed(INFERENCE_SEED))
    return {"sample.action": torch.stack(actions), "sample.init_noise": init[0]}


def main() -> None:
    torch.set_num_threads(1)
    vae = StubVAE()
    model = build(VIDEO, vae)
    redraw(model, seed=1)
    inputs = make_inputs()
    model.train()
    expected = training_case(model, vae, inputs, "train")
    model.eval()
    expected.update(sampling_case(model, vae, inputs))
    # The per_frame_causal case: the same weights in a video expert whose video -> video mask is frame-causal.
    causal = build({**VIDEO, "video_attention_mask_mode": "per_frame_causal"}, vae)
    causal.load_state_dict(model.state_dict(), strict=True)
    causal.train()
    expected.update(training_case(causal, vae, inputs, "per_frame_causal"))
    draws = {k: expected.pop(f"train.{k}") for k in ("noise_video", "u_video", "noise_action", "u_action")}
    for k, v in draws.items():
        if not torch.equal(expected.pop(f"per_frame_causal.{k}"), v):
            sys.exit(f"the two training cases drew different {k}")
    inputs.update({f"train.{k}": v for k, v in draws.items()})
    inputs["sample.init_noise"] = expected.pop("sample.init_noise")

    OUT.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(OUT / "model.safetensors"))
    save_file({k: v.contiguous() for k, v in inputs.items()}, str(OUT / "inputs.safetensors"))
    save_file({k: v.contiguous() for k, v in expected.items()}, str(OUT / "expected.safetensors"))
    import diffusers
    import lerobot

    config = {"reference": "lerobot 0.6.1 FastWAM (policies/fastwam/wan: FastWAM.training_loss, infer_action)",
              "generator": "benchmarks/fastwam_second_golden.py", "lerobot_version": lerobot.__version__,
              "torch_version": torch.__version__, "diffusers_version": diffusers.__version__,
              "video_dit_config": VIDEO, "action_dit_config": ACTION, "proprio_dim": None, **SCHEDULES,
              "num_inference_steps": NUM_STEPS, "inference_seed": INFERENCE_SEED, "train_seed": TRAIN_SEED,
              "batch_size": B, "raw_frames": RAW_FRAMES, "latent_hw": list(LATENT_HW), "action_horizon": HORIZON,
              "context_valid": CONTEXT_VALID, "image_is_pad": IMAGE_PAD, "action_is_pad": ACTION_PAD,
              "cases": {"train": "first_frame_causal", "per_frame_causal": "video_attention_mask_mode="
                        "per_frame_causal (training only)", "sample": "infer_action per element, seed 7"}}
    (OUT / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    size = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({size / 1024:.0f} KB): loss {expected['train.loss']:.6f}, per_frame_causal loss "
          f"{expected['per_frame_causal.loss']:.6f}, |sample.action| max {expected['sample.action'].abs().max():.3f}")


if __name__ == "__main__":
    main()
