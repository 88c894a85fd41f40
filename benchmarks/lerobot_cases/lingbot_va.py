"""LingBot-VA: lerobot 0.6.1's ``LingBotVAPolicy.training_loss_from_streams`` vs our ``LingBotVAModel``.

The step is the dual-stream flow-matching loss: both streams noised (noisy-conditioning coin for the video),
the four-stream transformer under the block-causal mask, the weighted video and action losses, from given video
latents, actions and text embeddings (the Wan VAE and UMT5 are frozen and outside the state dict on both sides).
lerobot trains it in bfloat16 with flex attention (``attn_mode='flex'``, the only mode its training accepts), so
both transformers run with bfloat16 weights here whatever ``--dtype`` says, and ours with its default attention
backend (``auto``). Flex attention has no backward on CPU: there both sides time the forward (the loss under
``no_grad``); on CUDA the step is forward + backward + AdamW. lerobot draws its timesteps, noise, the coin and the
mask's chunk/window sizes from the global RNG inside the call; our model's generator is seeded with the same seed
and draws the same values (the shared golden checks this: ``../shared/fixtures/lingbot_va_lerobot``). Being
bfloat16 on both sides through different kernels, the losses agree to bfloat16 rounding, not to 1e-5.

Sizes: ``tiny`` (the shared fixture's) and ``mid`` (8 heads x 32 = 256 wide, 4 layers, FFN 1024, 8 latent frames
of 8 x 16 (32 video tokens each after the 2 x 2 patch), 4 actions per frame: 576 tokens; 512 text positions;
batch 4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.lerobot_cases import Side

SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"heads": 2, "head_dim": 14, "layers": 2, "ffn": 56, "channels": 8, "action_dim": 8, "used": 6,
             "text": 16, "freq": 16, "frames": 5, "latent_hw": [4, 6], "per_frame": 4, "text_valid": 12, "batch": 2},
    "mid": {"heads": 8, "head_dim": 32, "layers": 4, "ffn": 1024, "channels": 16, "action_dim": 30, "used": 7,
            "text": 256, "freq": 256, "frames": 8, "latent_hw": [8, 16], "per_frame": 4, "text_valid": 40,
            "batch": 4},
}
LEROBOT_COMPILE = False
WEIGHTS = "transformer.safetensors"
TEXT_LEN = 512  # lerobot hard-codes 512 text positions in its training cross-attention mask
SNR_SHIFT, ACTION_SNR_SHIFT, NOISY_COND_PROB = 5.0, 0.05, 0.5


def trains_on(device: Any) -> bool:
    """lerobot's training attention (flex) has a backward on CUDA only."""
    return device.type == "cuda"


def describe(size: dict[str, Any]) -> str:
    h, w = size["latent_hw"]
    tokens = 2 * size["frames"] * (h * w // 4 + size["per_frame"])
    return (f"{size['layers']} blocks, {size['heads']} heads x {size['head_dim']}, FFN {size['ffn']}, "
            f"{size['frames']} latent frames of {h}x{w}, {tokens} tokens (4 streams), batch {size['batch']}; "
            "bfloat16 weights on both sides (lerobot's training dtype), VAE and UMT5 outside")


def make_inputs(size: dict[str, Any]) -> dict[str, Any]:
    """bfloat16 latents and actions (unused action channels 0), the channel mask, and text embeddings zero past
    each prompt's length, at lerobot's 512 positions."""
    import torch

    b, gen = size["batch"], torch.Generator().manual_seed(0)
    f, apf = size["frames"], size["per_frame"]
    actions = torch.zeros(b, size["action_dim"], f, apf, 1)
    actions[:, :size["used"]] = torch.randn(b, size["used"], f, apf, 1, generator=gen)
    mask = torch.zeros_like(actions)
    mask[:, :size["used"]] = 1.0
    text = torch.zeros(b, TEXT_LEN, size["text"])
    for i in range(b):
        n = size["text_valid"] - 3 * (i % 2)
        text[i, :n] = torch.randn(n, size["text"], generator=gen)
    return {"latents": torch.randn(b, size["channels"], f, *size["latent_hw"], generator=gen).bfloat16(),
            "actions": actions.bfloat16(), "actions_mask": mask.bfloat16(), "text_emb": text.bfloat16()}


def lerobot_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any, *,
                 compile_model: bool) -> Side:
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.lingbot_va.configuration_lingbot_va import LingBotVAConfig
    from lerobot.policies.lingbot_va.modeling_lingbot_va import LingBotVAPolicy
    from safetensors.torch import load_file, save_file

    del compile_model  # lerobot's LingBot-VA has no compile switch (its flex attention is always compiled)
    h, w = size["latent_hw"]
    config = LingBotVAConfig(
        num_attention_heads=size["heads"], attention_head_dim=size["head_dim"], in_channels=size["channels"],
        out_channels=size["channels"], action_dim=size["action_dim"], text_dim=size["text"], freq_dim=size["freq"],
        ffn_dim=size["ffn"], num_layers=size["layers"], attn_mode="flex", dtype="bfloat16",
        action_per_frame=size["per_frame"], snr_shift=SNR_SHIFT, action_snr_shift=ACTION_SNR_SHIFT,
        used_action_channel_ids=list(range(size["used"])), height=16 * h, width=16 * w, device=str(device),
        push_to_hub=False)
    config.input_features = {"observation.images.image": PolicyFeature(type=FeatureType.VISUAL,
                                                                       shape=(3, 16 * h, 16 * w))}
    torch.manual_seed(0)
    with torch.device(device):
        policy = LingBotVAPolicy(config)
    weights = work / WEIGHTS
    if not weights.exists():  # the first lerobot run writes what every run loads (bfloat16, as lerobot keeps it)
        save_file({k: v.contiguous() for k, v in policy.transformer.state_dict().items()}, str(weights))
    policy.transformer.load_state_dict(load_file(str(weights), device=str(device)), strict=True)
    args = (inputs["latents"], inputs["actions"], inputs["actions_mask"], inputs["text_emb"])
    notes = []
    if device.type == "cpu":
        notes.append(_eager_flex_on_cpu())

    def loss(step: int) -> Any:
        del step
        return policy.training_loss_from_streams(*args)[0]

    return Side(model=policy.transformer, loss=loss, notes=notes)


def _eager_flex_on_cpu() -> str:
    """lerobot compiles flex attention (``torch.compile(flex_attention, dynamic=True)``); on CPU inductor's C++
    flex template does not build (torch 2.13: a C++ compile error), so its attention runs flex_attention eagerly
    here, as the shared golden was made. Same values; the eager path is a slow reference, so on CPU lerobot's
    time is far above what its GPU path costs."""
    from functools import partial

    from lerobot.policies.lingbot_va.utils import FlexAttnFunc
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    FlexAttnFunc.flex_attn = flex_attention
    FlexAttnFunc.compiled_create_block_mask = partial(_eager_block_mask, create_block_mask)
    return ("lerobot lingbot_va on CPU: flex attention run eagerly (its compiled flex does not build on CPU), a slow "
            "path: the CPU ratio flatters ours; compare on CUDA")


def _eager_block_mask(create: Any, *args: Any, _compile: bool = False, **kwargs: Any) -> Any:
    del _compile
    return create(*args, _compile=False, **kwargs)


def our_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any) -> Side:
    import torch
    from safetensors.torch import load_file

    from benchmarks.lerobot_cases import step_seed
    from embodied_models.lingbot_va.checkpoint import load_state_strict, map_keys
    from embodied_models.lingbot_va.config import LingBotVADataConfig, LingBotVAModelConfig
    from embodied_models.lingbot_va.modeling import LingBotVAModel

    model_config = LingBotVAModelConfig(
        patch_size=(1, 2, 2), num_attention_heads=size["heads"], attention_head_dim=size["head_dim"],
        in_channels=size["channels"], out_channels=size["channels"], action_dim=size["action_dim"],
        used_action_channel_ids=list(range(size["used"])), text_dim=size["text"], freq_dim=size["freq"],
        ffn_dim=size["ffn"], num_layers=size["layers"], eps=1e-6, snr_shift=SNR_SHIFT,
        action_snr_shift=ACTION_SNR_SHIFT, noisy_cond_prob=NOISY_COND_PROB, text_dropout_prob=0.0,
        chunk_size_range=(1, 4), window_size_range=(4, 64), attention_backend="auto")
    data_config = LingBotVADataConfig(num_latent_frames=size["frames"], action_per_frame=size["per_frame"],
                                      action_horizon=size["frames"] * size["per_frame"])
    torch.manual_seed(1)  # another init than lerobot's: every value must come from the file
    with torch.device(device):
        model = LingBotVAModel(model_config, data_config)
    weights = load_file(str(work / WEIGHTS), device=str(device))
    report = load_state_strict(model.transformer, map_keys(weights, "lingbot_va"), source=str(work / WEIGHTS))
    if not report.ok:
        raise SystemExit(f"lingbot_va: our strict loader refused lerobot's weights: {report.describe()}")
    torch.nn.Module.to(model, dtype=torch.bfloat16)  # lerobot's training dtype (diffusers' .to would only warn)
    batch = {k: inputs[k] for k in ("latents", "actions", "actions_mask", "text_emb")}

    def loss(step: int) -> Any:
        model.seed_rng(step_seed(step))  # our draws come from the model's generator, seeded like lerobot's RNG
        return model(batch).loss

    return Side(model=model, loss=loss)
