"""pi0.5: lerobot 0.6.1's ``PI05Pytorch`` vs our ``Pi05Model``.

The loss is lerobot's policy reduction (ours too): the per-element flow-matching loss for the given noise and
time, averaged over the real action dims. lerobot hard-codes the released PaliGemma / expert sizes, so its config
builders are resized as they are called. Sizes: ``tiny`` (smoke), ``mid`` (VLM 256 wide x 4 layers, expert 128,
SigLIP 128 x 4, 2 cameras at 224, chunk 50, batch 8: the matmuls dominate) and ``full`` (PaliGemma 2B + 300M
expert, for a GPU).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchmarks.lerobot_cases import Side

SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"vlm_width": 64, "vlm_mlp": 128, "expert_width": 32, "expert_mlp": 64, "depth": 2, "heads": 8,
             "head_dim": 8, "vision_width": 32, "vision_depth": 2, "vision_mlp": 64, "vision_heads": 2,
             "image": 56, "vocab": 1024, "tokens": 16, "chunk": 10, "batch": 2},
    "mid": {"vlm_width": 256, "vlm_mlp": 1024, "expert_width": 128, "expert_mlp": 512, "depth": 4, "heads": 8,
            "head_dim": 32, "vision_width": 128, "vision_depth": 4, "vision_mlp": 512, "vision_heads": 4,
            "image": 224, "vocab": 1024, "tokens": 48, "chunk": 50, "batch": 8},
    "full": {"vlm_width": 2048, "vlm_mlp": 16384, "expert_width": 1024, "expert_mlp": 4096, "depth": 18, "heads": 8,
             "head_dim": 256, "vision_width": 1152, "vision_depth": 27, "vision_mlp": 4304, "vision_heads": 16,
             "image": 224, "vocab": 257152, "tokens": 200, "chunk": 50, "batch": 32},
}
LEROBOT_COMPILE = True  # PI05Config.compile_model
CAMERAS, PATCH, ACTION_DIM, REAL_ACTION_DIM = 2, 14, 32, 14
WEIGHTS = "model.safetensors"


def describe(size: dict[str, Any]) -> str:
    return (f"VLM {size['vlm_width']}x{size['depth']}, expert {size['expert_width']}, SigLIP "
            f"{size['vision_width']}x{size['vision_depth']}, {CAMERAS} cameras at {size['image']}, chunk "
            f"{size['chunk']}, batch {size['batch']}")


def make_inputs(size: dict[str, Any]) -> dict[str, Any]:
    """Images in [-1, 1], masks (camera 1 of the last element absent), right-padded prompt tokens, actions zero
    beyond the real dims, noise and flow-matching time."""
    import torch

    batch = size["batch"]
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, size["vocab"], (batch, size["tokens"]), generator=gen)
    lengths = torch.randint(size["tokens"] // 2, size["tokens"] + 1, (batch,), generator=gen)
    lang_mask = torch.arange(size["tokens"])[None] < lengths[:, None]
    actions = torch.zeros(batch, size["chunk"], ACTION_DIM)
    actions[..., :REAL_ACTION_DIM] = torch.randn(batch, size["chunk"], REAL_ACTION_DIM, generator=gen)
    masks = torch.ones(batch, CAMERAS, dtype=torch.bool)
    masks[-1, 1] = False
    beta = torch.distributions.Beta(torch.tensor(1.5), torch.tensor(1.0))
    return {"images": torch.rand(batch, CAMERAS, 3, size["image"], size["image"], generator=gen) * 2 - 1,
            "image_masks": masks, "lang_tokens": tokens * lang_mask, "lang_mask": lang_mask, "actions": actions,
            "noise": torch.randn(batch, size["chunk"], ACTION_DIM, generator=gen),
            "time": beta.sample((batch,)) * 0.999 + 0.001}


def lerobot_model(size: dict[str, Any], *, compile_model: bool) -> Any:
    """lerobot's PI05Pytorch at ``size``: its PaliGemma / expert config builders resized as they are called."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lerobot.policies.pi05 import modeling_pi05 as mp
    from lerobot.policies.pi05.configuration_pi05 import PI05Config

    def gemma(variant: str) -> Any:
        width, mlp = ((size["vlm_width"], size["vlm_mlp"]) if variant == "gemma_2b"
                      else (size["expert_width"], size["expert_mlp"]))
        return mp.GemmaConfig(width=width, depth=size["depth"], mlp_dim=mlp, num_heads=size["heads"],
                              num_kv_heads=1, head_dim=size["head_dim"])

    vlm_class, expert_class = mp.PaliGemmaForConditionalGenerationWithPiGemma, mp.PiGemmaForCausalLM

    def vlm(config: Any) -> Any:
        vision = config.vision_config
        vision.hidden_size, vision.num_hidden_layers = size["vision_width"], size["vision_depth"]
        vision.intermediate_size, vision.num_attention_heads = size["vision_mlp"], size["vision_heads"]
        vision.projection_dim = size["vlm_width"]
        config.text_config.vocab_size = config._vocab_size = size["vocab"]
        config.image_token_index = size["vocab"]
        return vlm_class(config=config)

    def expert(config: Any) -> Any:
        config.vocab_size = size["vocab"]
        return expert_class(config=config)

    mp.get_gemma_config, mp.PaliGemmaForConditionalGenerationWithPiGemma, mp.PiGemmaForCausalLM = gemma, vlm, expert
    # the released variant names (PI05Config checks them); get_gemma_config above gives them this size
    config = PI05Config(paligemma_variant="gemma_2b", action_expert_variant="gemma_300m", dtype="float32",
                        chunk_size=size["chunk"], n_action_steps=size["chunk"], max_action_dim=ACTION_DIM,
                        image_resolution=(size["image"], size["image"]), compile_model=compile_model,
                        compile_mode="default")
    return mp.PI05Pytorch(config)


def lerobot_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any, *,
                 compile_model: bool) -> Side:
    import torch
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    with torch.device(device):  # built where it runs: the full size initializes in seconds on a GPU
        model = lerobot_model(size, compile_model=compile_model)
    weights = work / WEIGHTS
    if not weights.exists():  # the first lerobot run writes the weights every run loads
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
    model.load_state_dict(load_file(str(weights), device=str(device)), strict=True)
    images = [inputs["images"][:, c] for c in range(CAMERAS)]
    img_masks = [inputs["image_masks"][:, c] for c in range(CAMERAS)]

    def loss(step: int) -> Any:
        del step
        elements = model(images, img_masks, inputs["lang_tokens"], inputs["lang_mask"], inputs["actions"],
                         inputs["noise"], inputs["time"])
        return elements[..., :REAL_ACTION_DIM].float().mean()

    def predict() -> Any:
        return model.sample_actions(images, img_masks, inputs["lang_tokens"], inputs["lang_mask"],
                                    noise=inputs["noise"])

    return Side(model=model, loss=loss, compiled="compile_model" if compile_model else "", predict=predict)


def our_model(size: dict[str, Any]) -> Any:
    from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig
    from embodied_models.pi05.modeling import Pi05Model

    model = Pi05ModelConfig(vlm_width=size["vlm_width"], vlm_mlp_dim=size["vlm_mlp"], vocab_size=size["vocab"],
                            expert_width=size["expert_width"], expert_mlp_dim=size["expert_mlp"],
                            depth=size["depth"], num_heads=size["heads"], num_kv_heads=1, head_dim=size["head_dim"],
                            vision_width=size["vision_width"], vision_depth=size["vision_depth"],
                            vision_mlp_dim=size["vision_mlp"], vision_num_heads=size["vision_heads"],
                            vision_patch_size=PATCH, max_action_dim=ACTION_DIM, max_token_len=size["tokens"])
    data = Pi05DataConfig(camera_keys=[f"cam{i}" for i in range(CAMERAS)], num_image_slots=CAMERAS,
                          image_size=(size["image"], size["image"]), action_dim=REAL_ACTION_DIM,
                          action_horizon=size["chunk"])
    return Pi05Model(model, data)


def our_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any) -> Side:
    import torch

    from embodied_models.pi05.batch import Pi05PreparedBatch
    from embodied_models.pi05.checkpoint import load_pi05_checkpoint

    torch.manual_seed(1)  # another init than lerobot's: every value must come from the file
    with torch.device(device):
        model = our_model(size)
    report = load_pi05_checkpoint(model, work / WEIGHTS)
    if not report.ok:
        raise SystemExit(f"pi05: our strict loader refused lerobot's weights: {report}")
    batch = Pi05PreparedBatch(images=inputs["images"], image_masks=inputs["image_masks"],
                              tokens=inputs["lang_tokens"], token_mask=inputs["lang_mask"], actions=inputs["actions"])

    def loss(step: int) -> Any:
        del step
        elements = model.loss_elements(batch, noise=inputs["noise"], time=inputs["time"])
        return elements[..., :REAL_ACTION_DIM].float().mean()

    def predict() -> Any:
        return model.sample_actions(batch, noise=inputs["noise"])

    return Side(model=model, loss=loss, predict=predict)
