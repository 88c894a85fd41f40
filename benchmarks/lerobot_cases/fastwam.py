"""FastWAM: lerobot 0.6.1's ``FastWAM`` (Wan video DiT + action DiT joined per layer, MoT) vs our ``FastWAMModel``.

The step is ``FastWAM.training_loss``: both experts noised and run jointly, the timestep-weighted video and action
flow-matching losses, then backward + AdamW over both experts and the proprio encoder. The Wan VAE and the UMT5
text encoder are frozen and outside both state dicts: lerobot is given a stub VAE that returns the latents
(as the shared golden ``../shared/fixtures/fastwam_lerobot`` does) and ours reads the same latents as a latent
cache; the text context is an input on both sides. lerobot draws the video noise, video u, action noise and action
u inside ``training_loss``; ours draws them in the same order from the same seeded global RNG. lerobot's init
zeroes the video head and every bias (a near-constant loss would check little), so its weights are re-drawn at
unit scale before they are saved.

Sizes: ``tiny`` (the shared fixture's) and ``mid`` (8 heads x 32, 4 layers, video 256 wide, action 128 wide;
33 frames -> 9 latent frames of 12 x 16 (432 video tokens), 16 latent channels; horizon 32; batch 4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.lerobot_cases import Side

SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"heads": 2, "head_dim": 16, "layers": 2, "video": 32, "video_ffn": 64, "video_freq": 16, "action": 24,
             "action_ffn": 48, "action_freq": 12, "text": 16, "channels": 8, "frames": 9, "latent_hw": [4, 6],
             "horizon": 8, "action_dim": 7, "proprio": 5, "context": 6, "batch": 2},
    "mid": {"heads": 8, "head_dim": 32, "layers": 4, "video": 256, "video_ffn": 1024, "video_freq": 256,
            "action": 128, "action_ffn": 512, "action_freq": 256, "text": 256, "channels": 16, "frames": 33,
            "latent_hw": [12, 16], "horizon": 32, "action_dim": 14, "proprio": 14, "context": 32, "batch": 4},
}
LEROBOT_COMPILE = False
WEIGHTS = "model.safetensors"
SHIFT, TIMESTEPS = 5.0, 1000
SAMPLING_STEPS, INFERENCE_SEED = 10, 42  # lerobot's FastWAMPolicy defaults: 10 steps, noise from seed 42


def describe(size: dict[str, Any]) -> str:
    f = (size["frames"] - 1) // 4 + 1
    h, w = size["latent_hw"]
    return (f"{size['layers']} MoT layers, {size['heads']} heads x {size['head_dim']}, video {size['video']} / action "
            f"{size['action']} wide, {f} latent frames of {h}x{w} ({f * h * w // 4} video tokens), horizon "
            f"{size['horizon']}, batch {size['batch']}; VAE and text encoder frozen and outside (latents given)")


def make_inputs(size: dict[str, Any]) -> dict[str, Any]:
    """Latents, context (zeroed past each prompt), proprio, actions, and pads (element 1: the last latent frame's
    raw frames and the last 3 action steps)."""
    import torch

    b, gen = size["batch"], torch.Generator().manual_seed(0)
    f = (size["frames"] - 1) // 4 + 1
    context = torch.randn(b, size["context"], size["text"], generator=gen)
    for i in range(1, b, 2):
        context[i, size["context"] * 2 // 3:] = 0
    image_is_pad = torch.zeros(b, size["frames"], dtype=torch.bool)
    action_is_pad = torch.zeros(b, size["horizon"], dtype=torch.bool)
    if b > 1:
        image_is_pad[1, -4:] = True
        action_is_pad[1, -3:] = True
    return {"latents": torch.randn(b, size["channels"], f, *size["latent_hw"], generator=gen), "context": context,
            "context_mask": torch.ones(b, size["context"], dtype=torch.bool),
            "proprio": torch.randn(b, 1, size["proprio"], generator=gen),
            "action": torch.randn(b, size["horizon"], size["action_dim"], generator=gen),
            "image_is_pad": image_is_pad, "action_is_pad": action_is_pad}


def _redraw(module: Any, seed: int) -> None:
    """Unit-scale random weights: matrices N(0, 1/fan_in), biases N(0, 0.1^2), norm scales 1 + N(0, 0.25^2),
    modulation tables N(0, 0.3^2)."""
    import torch

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
                p.copy_(torch.randn(p.shape, generator=g) / (p[0].numel() if p.dim() > 1 else p.numel()) ** 0.5)


def lerobot_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any, *,
                 compile_model: bool) -> Side:
    import torch
    from lerobot.policies.fastwam.wan import ActionDiT, FastWAM, MoT, WanVideoDiT
    from safetensors.torch import load_file, save_file
    from torch import nn

    del compile_model  # lerobot's FastWAM has no compile switch
    latents = inputs["latents"]

    class StubVAE(nn.Module):
        """Returns the latents it holds (the clip's in training, one first frame in sampling), with the Wan2.2
        VAE's factors."""

        temporal_downsample_factor, upsampling_factor, z_dim = 4, 16, size["channels"]
        current = latents

        def encode(self, videos: Any, device: Any = None, tiled: bool = False, tile_size: Any = None,
                   tile_stride: Any = None) -> Any:
            return self.current

    common = {"num_heads": size["heads"], "attn_head_dim": size["head_dim"], "num_layers": size["layers"],
              "text_dim": size["text"], "eps": 1e-6, "use_gradient_checkpointing": False, "fp32_attention": True}
    torch.manual_seed(0)
    with torch.device(device):
        video = WanVideoDiT(patch_size=[1, 2, 2], in_dim=size["channels"], hidden_dim=size["video"],
                            ffn_dim=size["video_ffn"], freq_dim=size["video_freq"], out_dim=size["channels"],
                            seperated_timestep=True, video_attention_mask_mode="first_frame_causal",
                            action_conditioned=False, action_dim=size["action_dim"],
                            action_group_causal_mask_mode="group_diagonal", **common)
        action = ActionDiT(action_dim=size["action_dim"], hidden_dim=size["action"], ffn_dim=size["action_ffn"],
                           freq_dim=size["action_freq"], **common)
        mot = MoT(mixtures={"video": video, "action": action}, mot_checkpoint_mixed_attn=False)
        vae = StubVAE()
        model = FastWAM(video_expert=video, action_expert=action, mot=mot, vae=vae, text_dim=size["text"],
                        proprio_dim=size["proprio"], device=str(device), torch_dtype=torch.float32,
                        video_train_shift=SHIFT, video_infer_shift=SHIFT, action_train_shift=SHIFT,
                        action_infer_shift=SHIFT, video_num_train_timesteps=TIMESTEPS,
                        action_num_train_timesteps=TIMESTEPS, loss_lambda_video=1.0, loss_lambda_action=1.0)
    weights = work / WEIGHTS
    if not weights.exists():  # the first lerobot run writes what every run loads
        _redraw(model, seed=1)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
    model.load_state_dict(load_file(str(weights), device=str(device)), strict=True)
    b, f = latents.shape[0], size["frames"]
    pixels = torch.zeros((), device=latents.device).expand(b, 3, f, *(16 * n for n in size["latent_hw"]))
    sample = {"video": pixels, **{k: inputs[k] for k in ("context", "context_mask", "proprio", "action",
                                                         "action_is_pad", "image_is_pad")}}

    def loss(step: int) -> Any:
        del step
        vae.current = latents
        return model.training_loss(dict(sample))[0]

    def predict() -> Any:
        # per element, as FastWAMPolicy.predict_action_chunk loops; the stub hands out element i's first frame
        out = []
        for i in range(b):
            vae.current = latents[i:i + 1, :, :1]
            out.append(model.infer_action(
                prompt=None, input_image=pixels[0, :, 0], action_horizon=size["horizon"],
                proprio=inputs["proprio"][i:i + 1, 0], context=inputs["context"][i:i + 1],
                context_mask=inputs["context_mask"][i:i + 1], num_inference_steps=SAMPLING_STEPS, sigma_shift=None,
                seed=INFERENCE_SEED, rand_device="cpu")["action"].reshape(size["horizon"], -1))
        return torch.stack(out)

    return Side(model=model, loss=loss, predict=predict)


def our_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any) -> Side:
    import torch

    from embodied_core.config.resolve import load_config
    from embodied_models.fastwam.modeling import build_model

    model_fields = {"in_channels": size["channels"], "out_channels": size["channels"], "num_heads": size["heads"],
                    "attn_head_dim": size["head_dim"], "num_layers": size["layers"], "video_hidden_dim": size["video"],
                    "video_ffn_dim": size["video_ffn"], "video_freq_dim": size["video_freq"],
                    "action_hidden_dim": size["action"], "action_ffn_dim": size["action_ffn"],
                    "action_freq_dim": size["action_freq"], "text_dim": size["text"], "eps": 1e-6,
                    "patch_size": [1, 2, 2], "video_train_shift": SHIFT, "video_infer_shift": SHIFT,
                    "action_train_shift": SHIFT, "action_infer_shift": SHIFT, "num_train_timesteps": TIMESTEPS,
                    "num_inference_steps": SAMPLING_STEPS, "inference_seed": INFERENCE_SEED}
    data_fields = {"action_dim": size["action_dim"], "state_dim": size["proprio"], "text_dim": size["text"],
                   "action_horizon": size["horizon"], "num_video_frames": size["frames"],
                   "action_video_freq_ratio": size["horizon"] // (size["frames"] - 1)}
    cfg = load_config(training={"model_name": "fastwam_tiny"}, model=model_fields, data=data_fields)
    torch.manual_seed(1)  # another init than lerobot's: every value must come from the file
    with torch.device(device):
        model = build_model(cfg.model, cfg.data)
    report = model.load_pretrained_checkpoint(work / WEIGHTS)
    if not report.ok:
        raise SystemExit(f"fastwam: our strict loader refused lerobot's weights: {report.describe()}")
    batch = {k: inputs[k] for k in ("latents", "context", "context_mask", "proprio", "action", "action_is_pad",
                                    "image_is_pad")}

    def loss(step: int) -> Any:
        del step
        return model(batch).loss  # draws: video noise, video u, action noise, action u (lerobot's order)

    # our collator's proprio is [B, H, D] (row 0 is the state; H sets the chunk length)
    first = {"latents": inputs["latents"][:, :, :1], "context": inputs["context"],
             "context_mask": inputs["context_mask"], "proprio": inputs["proprio"].expand(-1, size["horizon"], -1)}

    def predict() -> Any:
        return model.sample_actions(first)  # model.inference_seed: lerobot's noise, the same for every element

    return Side(model=model, loss=loss, predict=predict)
