"""SmolVLA configuration: the ``model:`` and ``data:`` sections (no torch; ``--help`` reads these).

Defaults are the official ``lerobot/smolvla_base`` sizes: SmolVLM2-500M-Video-Instruct (SigLIP-style vision
encoder 768 x 12 at 512 px, pixel shuffle x4, SmolLM2 text decoder 960 wide cut to its first 16 layers) and an
action expert 0.75 x as wide whose layers alternate self- and cross-attention (lerobot 0.6.1
``policies/smolvla/configuration_smolvla.py``). The CPU preset ``smolvla_tiny`` only changes sizes.
"""

from __future__ import annotations

from typing import Literal

import attrs

from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_core.config.validators import non_negative, positive
from embodied_models.vla.checks import builtin_vocab_problems, multiple_problems
from embodied_models.vla.fields import FlowTimeFields, LocalTokenizerPath, place_after

__all__ = ["SmolVLADataConfig", "SmolVLAModelConfig", "expert_mlp_dim", "expert_width"]


def expert_width(model: SmolVLAModelConfig) -> int:
    """Hidden width of the action expert: ``int(vlm_width * expert_width_multiplier)`` (lerobot's rounding)."""
    return int(model.vlm_width * model.expert_width_multiplier)


def expert_mlp_dim(width: int, *, multiplier: int = 4, multiple_of: int = 256) -> int:
    """SwiGLU inner width of the expert: ``int(2w/3) * 4`` rounded up to a multiple of 256 (Llama's sizing rule,
    as lerobot's ``get_intermediate_size`` applies it)."""
    inner = int(multiplier * int(2 * width / 3))
    return multiple_of * -(-inner // multiple_of)


@attrs.define(kw_only=True, field_transformer=place_after("num_inference_steps", FlowTimeFields))
class SmolVLAModelConfig(FlowTimeFields, BaseModelConfig):
    """SmolVLA network sizes, flow-matching constants and what trains. Defaults are smolvla_base's."""

    # --- VLM text decoder (SmolLM2, Llama-style) ---
    vlm_width: int = attrs.field(default=960, validator=positive)
    """Hidden width of the VLM text decoder (SmolVLM2-500M: 960)."""
    vlm_mlp_dim: int = attrs.field(default=2560, validator=positive)
    """SwiGLU inner width of the VLM text decoder."""
    vocab_size: int = attrs.field(default=49280, validator=positive)
    """Token embedding rows (SmolVLM2 tokenizer: 49280)."""
    num_vlm_layers: int = attrs.field(default=16, validator=positive)
    """VLM text layers kept: lerobot keeps the first N of SmolVLM2's 32 and drops the rest."""
    num_heads: int = attrs.field(default=15, validator=positive)
    """Query heads of both towers (the expert copies the VLM's head layout)."""
    num_kv_heads: int = attrs.field(default=5, validator=positive)
    """Key/value heads of both towers (grouped-query attention)."""
    head_dim: int = attrs.field(default=64, validator=positive)
    """Per-head width of both towers."""
    rms_norm_eps: float = attrs.field(default=1e-5, validator=positive)
    """RMSNorm epsilon of both towers (Llama-style ``w * x / rms(x)``)."""
    rope_theta: float = attrs.field(default=10000.0, validator=positive)
    """RoPE base. lerobot hard-codes 10000 and ignores SmolVLM2's configured 100000; changing it gives another
    model than every SmolVLA checkpoint was trained as."""
    pad_token_id: int = attrs.field(default=2, validator=non_negative)
    """Embedding row of the padding token (no gradient; SmolVLM2: 2 = <|im_end|>)."""
    keep_lm_head: bool = True
    """Keep the VLM's language-model head (vocab x width, frozen, never used by the policy) so that lerobot
    checkpoints load strictly and the parameter count is smolvla_base's; false drops it (the loader then
    ignores the checkpoint's lm_head)."""
    # --- action expert ---
    expert_width_multiplier: float = attrs.field(default=0.75, validator=positive)
    """Expert width = int(vlm_width * this) (smolvla_base: 720); its SwiGLU width follows Llama's sizing rule."""
    num_expert_layers: int = 0
    """Expert layers; <= 0: one per VLM layer. Fewer must divide num_vlm_layers: expert layer j then pairs with
    VLM layer j * (num_vlm_layers / num_expert_layers) and the VLM layers in between have none."""
    attention_mode: Literal["cross_attn", "self_attn"] = "cross_attn"
    """cross_attn: every self_attn_every_n_layers-th layer attends jointly, the others let the expert
    cross-attend to the VLM's keys/values; self_attn: every layer attends jointly."""
    self_attn_every_n_layers: int = attrs.field(default=2, validator=positive)
    """With cross_attn: layer i attends jointly when i % n == 0 and cross-attends otherwise."""
    # --- vision (SigLIP-style SmolVLM encoder) + connector ---
    vision_width: int = attrs.field(default=768, validator=positive)
    """Vision encoder hidden width."""
    vision_depth: int = attrs.field(default=12, validator=positive)
    """Vision encoder layers."""
    vision_mlp_dim: int = attrs.field(default=3072, validator=positive)
    """Vision encoder MLP width."""
    vision_num_heads: int = attrs.field(default=12, validator=positive)
    """Vision encoder attention heads."""
    vision_patch_size: int = attrs.field(default=16, validator=positive)
    """Patch size; data.image_size must be a multiple of it."""
    layer_norm_eps: float = attrs.field(default=1e-6, validator=positive)
    """Vision encoder LayerNorm epsilon."""
    scale_factor: int = attrs.field(default=4, validator=positive)
    """Pixel-shuffle factor of the connector: (image/patch)^2 / factor^2 tokens per camera (smolvla_base: 64)."""
    # --- prefix layout ---
    add_image_special_tokens: bool = False
    """Put <fake_token_around_image><global-img> before and <fake_token_around_image> after each camera's
    tokens (off in smolvla_base)."""
    fake_image_token_id: int = attrs.field(default=49189, validator=non_negative)
    """Id of <fake_token_around_image> (SmolVLM2 tokenizer); used with add_image_special_tokens."""
    global_image_token_id: int = attrs.field(default=49152, validator=non_negative)
    """Id of <global-img> (SmolVLM2 tokenizer); used with add_image_special_tokens."""
    prefix_length: int = -1
    """Pad the prefix [images | language | state] at its end to at least this many tokens, as lerobot's
    prefix_length: the pads are zero embeddings marked invalid, so no valid token reads them and every output is
    unchanged; the prefix outputs and the KV cache then have this length (lerobot's shapes). <= 0: no padding
    (lerobot's default -1). A longer prefix is not cut."""
    max_state_dim: int = attrs.field(default=32, validator=positive)
    """The state is zero-padded to this width before state_proj."""
    max_action_dim: int = attrs.field(default=32, validator=positive)
    """Actions are zero-padded to this width (action_in/out projections)."""
    tokenizer_max_length: int = attrs.field(default=48, validator=positive)
    """Language tokens per sample: the task (+ "\\n") is truncated / right-padded to this length."""
    # --- flow matching ---
    num_inference_steps: int = attrs.field(default=10, validator=positive)
    """Euler steps of sample_actions (t from 1 to 0); lerobot's num_steps."""
    # --- what trains (lerobot's fine-tuning defaults) ---
    freeze_vision_encoder: bool = True
    """Freeze the vision encoder (lerobot default)."""
    train_expert_only: bool = True
    """Freeze the whole VLM (vision, connector, embeddings, text layers) and train the expert, the action/time
    projections and (train_state_proj) the state projection: lerobot's default fine-tuning."""
    train_state_proj: bool = True
    """Train the state projection (it feeds the VLM prefix)."""
    # --- execution ---
    attn_implementation: Literal["eager", "sdpa"] = "sdpa"
    """Attention kernel of the joint VLM/expert layers: eager (lerobot's op order) or torch SDPA (faster; within
    1e-5 of lerobot). The vision encoder always uses transformers' SDPA path, as lerobot runs it."""
    gradient_checkpointing: bool = False
    """Recompute each joint layer in backward to save activation memory."""
    tokenizer: Literal["smolvlm", "tiny"] = "smolvlm"
    """Prompt tokenizer: SmolVLM2's from data.tokenizer_path / --tokenizer-path, or the built-in byte tokenizer
    of smolvla_tiny (no files, 261 ids)."""

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = []
        width = expert_width(self)
        if width < 2 or width % 2:
            problems.append(f"model.expert_width_multiplier {self.expert_width_multiplier} gives an expert width of "
                            f"{width}; it must be even (sin-cos time embedding) and >= 2")
        elif width % self.num_heads:
            problems.append(f"model.expert_width_multiplier {self.expert_width_multiplier} gives an expert width of "
                            f"{width}, not a multiple of model.num_heads {self.num_heads} (transformers' Llama layers "
                            "require it)")
        problems += multiple_problems(self, ("num_heads", "num_kv_heads"), ("vlm_width", "num_heads"))
        if self.head_dim % 2:
            problems.append(f"model.head_dim must be even for RoPE (got {self.head_dim})")
        problems += multiple_problems(self, ("vision_width", "vision_num_heads"))
        if self.num_expert_layers > 0 and self.num_vlm_layers % self.num_expert_layers:
            problems.append(f"model.num_expert_layers {self.num_expert_layers} must divide model.num_vlm_layers "
                            f"{self.num_vlm_layers} (or be <= 0: one expert layer per VLM layer)")
        if self.pad_token_id >= self.vocab_size:
            problems.append(f"model.pad_token_id {self.pad_token_id} is not below model.vocab_size {self.vocab_size}")
        if self.add_image_special_tokens:
            for name in ("fake_image_token_id", "global_image_token_id"):
                if getattr(self, name) >= self.vocab_size:
                    problems.append(f"model.{name} {getattr(self, name)} is not below model.vocab_size "
                                    f"{self.vocab_size}")
        problems += self.flow_time_problems()
        if self.tokenizer == "tiny":
            from embodied_models.smolvla.tokenizer import TINY_VOCAB_SIZE

            problems += builtin_vocab_problems(self.vocab_size, TINY_VOCAB_SIZE, builtin="tiny tokenizer",
                                               alternative="model.tokenizer=smolvlm")
        return problems

    def expert_layer_stride(self) -> int:
        """VLM layers per expert layer (1 when every VLM layer has one)."""
        return self.num_vlm_layers // self.num_expert_layers if self.num_expert_layers > 0 else 1

    def is_cross_layer(self, index: int) -> bool:
        """Whether layer ``index`` lets the expert cross-attend to the VLM (instead of one joint attention)."""
        return self.attention_mode == "cross_attn" and index % self.self_attn_every_n_layers != 0


@attrs.define(kw_only=True)
class SmolVLADataConfig(LocalTokenizerPath, BaseDataConfig):
    """What SmolVLA asks of the data (smolvla_base: 512 px frames, chunks of 50, mean/std normalization).

    Every camera of ``camera_keys`` adds ``(image/patch)^2 / scale_factor^2`` prefix tokens; a camera a sample lacks
    is a black frame with mask 0, and ``empty_cameras`` adds such slots (lerobot's ``empty_cameras``).
    """

    camera_keys: list[str] | None = None
    """Camera feature keys, in prefix order; unset: the dataset's cameras in their declared order."""
    empty_cameras: int = attrs.field(default=0, validator=non_negative)
    """Extra image slots that are always empty (-1 image, mask 0), as lerobot's empty_cameras."""
    image_size: tuple[int, int] = (512, 512)
    """Model resolution (square): frames are resized keeping their aspect and padded on the left/top with black
    (lerobot's resize_imgs_with_padding); also the vision encoder's position-embedding grid."""
    state_dim: int | None = None
    """Real state width (<= model.max_state_dim); unset: the dataset's."""
    action_dim: int | None = None
    """Real action width (<= model.max_action_dim); the loss averages over these dims only. Unset: the dataset's."""
    action_horizon: int = 50
    """Action chunk length (lerobot's chunk_size; smolvla_base: 50)."""
    normalization: Literal["mean_std", "quantile", "min_max", "none"] = "mean_std"
    """State/action normalization from the dataset stats (smolvla_base: mean_std)."""
    tokenizer_path: str | None = None
    """Local Hugging Face tokenizer directory (SmolVLM2's); falls back to --tokenizer-path (env TOKENIZER_PATH)."""

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = super().validate()
        if self.image_size[0] != self.image_size[1]:
            problems.append(f"data.image_size must be square for the vision encoder's pixel shuffle (got "
                            f"{tuple(self.image_size)})")
        if self.state_history != 1 or self.image_history != 1:
            problems.append("data.state_history and data.image_history must be 1 for SmolVLA (got "
                            f"{self.state_history}, {self.image_history})")
        if self.camera_keys is not None and len(self.camera_keys) + self.empty_cameras == 0:
            problems.append("SmolVLA needs at least one image slot: data.camera_keys is empty and data.empty_cameras "
                            "is 0")
        return problems
