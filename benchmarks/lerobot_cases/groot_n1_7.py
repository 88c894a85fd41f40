"""GR00T N1.7 action head: lerobot 0.6.1's ``GR00TN17ActionHead`` vs ours (``GrootN17Model.action_head``).

The step is the action head's: VL self-attention over given backbone features, state/action encoders, the
AlternateVL DiT, the decoder and the masked flow-matching loss, forward + backward + AdamW. That is what GR00T
trains under its defaults (``tune_llm`` and ``tune_visual`` false: the Qwen3-VL backbone is frozen); the frozen
backbone's forward is left out on both sides, as in the shared golden (``../shared/fixtures/groot_n1_7_lerobot``).
Dropout (0.2 in GR00T) and state dropout are set to 0 on both sides so the two compute the same function in train
mode. lerobot draws the noise (``randn``) and then the time (Beta(1.5, 1) on CPU) inside its forward; ours draws
them in that order from the same seeded global RNG and passes them in. lerobot's bare head ``state_dict`` loads
through our strict loader under ``action_head.`` (the toy backbone of our model allowed missing).

Sizes: ``tiny`` (the shared fixture's) and ``mid`` (DiT 8 x (8 heads x 48), output 256; VL self-attention 2 x 512;
256 backbone tokens of width 512, 192 of them image tokens; horizon 40; batch 16).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.lerobot_cases import Side

SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"backbone": 64, "hidden": 32, "dit_layers": 4, "dit_heads": 4, "dit_head_dim": 12, "vl_layers": 2,
             "vl_heads": 4, "state": 14, "action": 12, "real_state": 8, "real_action": 7, "horizon": 8,
             "embodiments": 4, "tokens": 12, "image_tokens": 6, "batch": 2},
    "mid": {"backbone": 512, "hidden": 256, "dit_layers": 8, "dit_heads": 8, "dit_head_dim": 48, "vl_layers": 2,
            "vl_heads": 8, "state": 64, "action": 32, "real_state": 29, "real_action": 29, "horizon": 40,
            "embodiments": 4, "tokens": 256, "image_tokens": 192, "batch": 16},
}
LEROBOT_COMPILE = False
WEIGHTS = "model.safetensors"
BETA, NOISE_S = (1.5, 1.0), 0.999


def describe(size: dict[str, Any]) -> str:
    return (f"action head: DiT {size['dit_layers']} x ({size['dit_heads']}x{size['dit_head_dim']}), VL self-attention "
            f"{size['vl_layers']} x {size['backbone']}, {size['tokens']} backbone tokens, horizon {size['horizon']}, "
            f"batch {size['batch']}; backbone frozen (GR00T's default) and left out")


def make_inputs(size: dict[str, Any]) -> dict[str, Any]:
    """Backbone features with a padded tail on odd elements and an image span, state and actions zero beyond the
    real dims, the action mask (real dims; the last 3 steps of element 0 masked), embodiment slots."""
    import torch

    b, n, gen = size["batch"], size["tokens"], torch.Generator().manual_seed(0)
    valid = torch.full((b,), n)
    valid[1::2] = n - max(1, n // 6)
    attention = torch.arange(n)[None] < valid[:, None]
    image = torch.zeros(b, n, dtype=torch.bool)
    image[:, 2:2 + size["image_tokens"]] = True
    state = torch.zeros(b, 1, size["state"])
    state[..., :size["real_state"]] = torch.randn(b, 1, size["real_state"], generator=gen)
    actions = torch.zeros(b, size["horizon"], size["action"])
    actions[..., :size["real_action"]] = torch.randn(b, size["horizon"], size["real_action"], generator=gen)
    mask = torch.zeros_like(actions)
    mask[..., :size["real_action"]] = 1.0
    mask[0, -3:] = 0.0
    return {"backbone_features": torch.randn(b, n, size["backbone"], generator=gen),
            "backbone_attention_mask": attention, "image_mask": image, "state": state, "action": actions,
            "action_mask": mask, "embodiment_id": torch.arange(b) % size["embodiments"]}


def lerobot_head_config(size: dict[str, Any]) -> Any:
    from lerobot.policies.groot.groot_n1_7 import GR00TN17Config

    return GR00TN17Config(
        backbone_embedding_dim=size["backbone"], hidden_size=size["hidden"],
        input_embedding_dim=size["dit_heads"] * size["dit_head_dim"], max_state_dim=size["state"],
        max_action_dim=size["action"], action_horizon=size["horizon"], max_num_embodiments=size["embodiments"],
        max_seq_len=max(16, size["horizon"]), state_dropout_prob=0.0,
        diffusion_model_cfg={"positional_embeddings": None, "num_layers": size["dit_layers"],
                             "num_attention_heads": size["dit_heads"], "attention_head_dim": size["dit_head_dim"],
                             "norm_type": "ada_norm", "dropout": 0.0, "final_dropout": True,
                             "output_dim": size["hidden"], "interleave_self_attention": True},
        vl_self_attention_cfg={"positional_embeddings": None, "num_layers": size["vl_layers"],
                               "num_attention_heads": size["vl_heads"],
                               "attention_head_dim": size["backbone"] // size["vl_heads"], "dropout": 0.0,
                               "final_dropout": True})


def lerobot_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any, *,
                 compile_model: bool) -> Side:
    import torch
    from lerobot.policies.groot.groot_n1_7 import GR00TN17ActionHead
    from safetensors.torch import load_file, save_file
    from transformers.feature_extraction_utils import BatchFeature

    del compile_model  # lerobot's GR00T has no compile switch
    torch.manual_seed(0)
    with torch.device(device):
        head = GR00TN17ActionHead(lerobot_head_config(size))
    weights = work / WEIGHTS
    if not weights.exists():  # the first lerobot run writes what every run loads
        save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(weights))
    head.load_state_dict(load_file(str(weights), device=str(device)), strict=True)
    backbone = {k: inputs[k] for k in ("backbone_features", "backbone_attention_mask", "image_mask")}
    action = {k: inputs[k] for k in ("state", "action", "action_mask", "embodiment_id")}

    def loss(step: int) -> Any:
        del step
        return head(BatchFeature(data=dict(backbone)), BatchFeature(data=dict(action)))["loss"]

    def predict() -> Any:
        out = head.get_action(BatchFeature(data=dict(backbone)), BatchFeature(
            data={k: inputs[k] for k in ("state", "embodiment_id")}))
        return out["action_pred"]

    return Side(model=head, loss=loss, predict=predict)


def our_model(size: dict[str, Any]) -> Any:
    """Our GrootN17Model with lerobot's head sizes on a toy backbone (only the head is stepped)."""
    from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig
    from embodied_models.groot_n1_7.modeling import GrootN17Model

    width = size["backbone"]
    head_dim = width // 4
    rotary = head_dim // 2
    cfg = GrootModelConfig(
        vocab_size=300, llm_width=width, llm_mlp_dim=2 * width, llm_num_heads=4, llm_num_kv_heads=2,
        llm_head_dim=head_dim, mrope_section=[rotary // 2, rotary // 4, rotary - rotary // 2 - rotary // 4],
        select_layer=1, vision_depth=1, vision_width=16, vision_mlp_dim=32, vision_num_heads=2, vision_patch_size=8,
        vision_num_position_embeddings=16, deepstack_layers=[], hidden_size=size["hidden"],
        input_embedding_dim=size["dit_heads"] * size["dit_head_dim"], max_state_dim=size["state"],
        max_action_dim=size["action"], action_horizon=size["horizon"], max_num_embodiments=size["embodiments"],
        max_seq_len=max(16, size["horizon"]), dit_num_layers=size["dit_layers"], dit_num_heads=size["dit_heads"],
        dit_head_dim=size["dit_head_dim"], vl_num_layers=size["vl_layers"], vl_num_heads=size["vl_heads"],
        vl_head_dim=width // size["vl_heads"], dropout=0.0, state_dropout_prob=0.0)
    data = GrootDataConfig(camera_keys=["cam"], state_dim=size["real_state"], action_dim=size["real_action"],
                           action_horizon=size["horizon"], image_size=(16, 16), embodiment_id=0)
    return GrootN17Model(cfg, data)


def our_side(size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any) -> Side:
    import torch

    from embodied_models.groot_n1_7.action_head import ActionHeadInputs

    torch.manual_seed(1)  # another init than lerobot's: every value must come from the file
    with torch.device(device):
        model = our_model(size)
    report = model.load_pretrained_checkpoint(work / WEIGHTS, allow_missing=("backbone.*",))
    # the head must be filled entirely; only our toy backbone is (allowed) missing
    if report.unexpected or report.mismatched or any(not k.startswith("backbone.") for k in report.missing):
        raise SystemExit(f"groot_n1_7: our strict loader refused lerobot's head weights: {report.describe()}")
    head = model.action_head
    head_inputs = ActionHeadInputs(features=inputs["backbone_features"],
                                   attention_mask=inputs["backbone_attention_mask"], image_mask=inputs["image_mask"],
                                   state=inputs["state"], embodiment_id=inputs["embodiment_id"])
    actions = inputs["action"]
    beta = torch.distributions.Beta(torch.tensor(BETA[0]), torch.tensor(BETA[1]), validate_args=False)

    def loss(step: int) -> Any:
        del step
        # lerobot's draws, in its order: the noise on the actions' device, then the time on CPU
        noise = torch.randn(actions.shape, device=actions.device, dtype=actions.dtype)
        t = (1 - beta.sample([actions.shape[0]]).to(actions.device, dtype=actions.dtype)) * NOISE_S
        return head.training_terms(head_inputs, actions, inputs["action_mask"], noise=noise, t=t)["loss"]

    def predict() -> Any:
        noise = torch.randn(actions.shape, device=actions.device, dtype=actions.dtype)
        return head.sample(head_inputs, noise, model.config.num_inference_steps)

    return Side(model=head, loss=loss, compile_target=model, predict=predict)
