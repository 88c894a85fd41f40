"""pi0.5 configuration: the ``model:`` and ``data:`` sections (no torch; ``--help`` reads these).

Defaults are the official pi0.5 sizes (PaliGemma-3B = SigLIP So400m/14 + Gemma-2B, action expert of
Gemma-300M shape), see openpi ``models/pi0_config.py`` / ``models/gemma.py`` and lerobot
``policies/pi05/configuration_pi05.py``. ``TINY_MODEL`` / ``TINY_DATA`` hold the CPU preset ``pi05_tiny``.
"""

from __future__ import annotations

from typing import Literal

import attrs

from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_core.config.validators import positive
from embodied_models.vla.checks import builtin_vocab_problems
from embodied_models.vla.fields import FlowTimeFields, LocalTokenizerPath, place_after

__all__ = ["MAX_CAMERAS", "Pi05DataConfig", "Pi05ModelConfig"]

MAX_CAMERAS = 3
"""pi0.5 was trained with three image slots (base + two wrists); more would change the prefix layout."""



@attrs.define(kw_only=True, field_transformer=place_after("num_inference_steps", FlowTimeFields))
class Pi05ModelConfig(FlowTimeFields, BaseModelConfig):
    """pi0.5 network sizes and flow-matching constants. Defaults are the official checkpoint's."""

    # --- VLM (PaliGemma's Gemma) ---
    vlm_width: int = attrs.field(default=2048, validator=positive)
    """Hidden width of the VLM (Gemma-2B: 2048)."""
    vlm_mlp_dim: int = attrs.field(default=16384, validator=positive)
    """GeGLU inner width of the VLM."""
    vocab_size: int = attrs.field(default=257152, validator=positive)
    """Token embedding rows (PaliGemma tokenizer: 257152)."""
    # --- action expert ---
    expert_width: int = attrs.field(default=1024, validator=positive)
    """Hidden width of the action expert (Gemma-300M shape: 1024); also the time-embedding width."""
    expert_mlp_dim: int = attrs.field(default=4096, validator=positive)
    """GeGLU inner width of the action expert."""
    # --- shared by both towers (joint attention needs equal depth and head layout) ---
    depth: int = attrs.field(default=18, validator=positive)
    """Number of layers of each tower."""
    num_heads: int = attrs.field(default=8, validator=positive)
    """Query heads of each tower."""
    num_kv_heads: int = attrs.field(default=1, validator=positive)
    """Key/value heads of each tower (grouped-query attention)."""
    head_dim: int = attrs.field(default=256, validator=positive)
    """Per-head width of each tower."""
    rms_norm_eps: float = attrs.field(default=1e-6, validator=positive)
    """RMSNorm / adaRMS epsilon."""
    rope_theta: float = attrs.field(default=10000.0, validator=positive)
    """RoPE base (both towers use the VLM's rotary embedding)."""
    # --- vision (SigLIP) ---
    vision_width: int = attrs.field(default=1152, validator=positive)
    """SigLIP hidden width (So400m: 1152)."""
    vision_depth: int = attrs.field(default=27, validator=positive)
    """SigLIP encoder layers."""
    vision_mlp_dim: int = attrs.field(default=4304, validator=positive)
    """SigLIP MLP width."""
    vision_num_heads: int = attrs.field(default=16, validator=positive)
    """SigLIP attention heads."""
    vision_patch_size: int = attrs.field(default=14, validator=positive)
    """SigLIP patch size; data.image_size must be a multiple of it."""
    layer_norm_eps: float = attrs.field(default=1e-6, validator=positive)
    """SigLIP LayerNorm epsilon."""
    # --- action/state padding ---
    max_action_dim: int = attrs.field(default=32, validator=positive)
    """Actions are zero-padded to this width (the checkpoint's action_in/out projections)."""
    max_state_dim: int = attrs.field(default=32, validator=positive)
    """The state is zero-padded to this width before it is discretized into the prompt."""
    max_token_len: int = attrs.field(default=200, validator=positive)
    """Prompt tokens per sample (padded/truncated)."""
    # --- flow matching ---
    num_inference_steps: int = attrs.field(default=10, validator=positive)
    """Euler steps of sample_actions (t from 1 to 0)."""
    # --- execution ---
    attn_implementation: Literal["eager", "sdpa"] = "sdpa"
    """Attention kernel: eager (the reference's op order) or torch SDPA (faster); both within 2e-6 of lerobot."""
    gradient_checkpointing: bool = False
    """Recompute each joint layer in backward to save activation memory (core's non-reentrant activation
    checkpointing, the mechanism of --activation-checkpoint-module-patterns layers.*)."""
    mask_padded_actions: bool = False
    """Exclude horizon steps past the episode end (action_is_pad) from the loss. lerobot and openpi keep
    them (the dataset repeats the last action), so the default keeps them too."""
    tokenizer: Literal["paligemma", "tiny"] = "paligemma"
    """Prompt tokenizer: the PaliGemma SentencePiece tokenizer from data.tokenizer_path / --tokenizer-path,
    or the self-contained byte+number tokenizer of pi05_tiny (no files, vocab 515)."""

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = self.flow_time_problems()
        if self.tokenizer == "tiny":
            from embodied_models.pi05.tokenizer import TINY_VOCAB_SIZE

            problems += builtin_vocab_problems(self.vocab_size, TINY_VOCAB_SIZE, builtin="tiny tokenizer",
                                               alternative="model.tokenizer=paligemma")
        return problems


@attrs.define(kw_only=True)
class Pi05DataConfig(LocalTokenizerPath, BaseDataConfig):
    """What pi0.5 asks of the data (official defaults: 224 px, horizon 50).

    ``camera_keys`` fill the model's image slots in order; slots beyond them, and cameras a sample lacks,
    become an image of -1 with mask 0 (as openpi does for absent wrist cameras).
    """

    camera_keys: list[str] | None = None
    """Camera feature keys, in slot order (at most data.num_image_slots); unset: the dataset's cameras in their
    declared order."""
    num_image_slots: int = attrs.field(default=MAX_CAMERAS, validator=positive)
    """Image slots in the prompt (pi0.5: 3); each costs (image_size/patch)^2 tokens."""
    image_size: tuple[int, int] = (224, 224)
    """Model resolution (square, a multiple of the SigLIP patch); frames are resized with padding to it."""
    state_dim: int | None = None
    """Real state width (<= model.max_state_dim); unset: the dataset's."""
    action_dim: int | None = None
    """Real action width (<= model.max_action_dim); the loss averages over these dims only. Unset: the dataset's."""
    action_horizon: int = 50
    """Action chunk length (pi0.5: 50)."""
    normalization: Literal["quantile", "mean_std", "none"] = "quantile"
    """State/action normalization from dataset stats: quantile maps q01..q99 to -1..1 (pi0.5)."""
    tokenizer_path: str | None = None
    """Local Hugging Face tokenizer directory; falls back to --tokenizer-path (env TOKENIZER_PATH)."""

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = super().validate()
        if self.camera_keys is not None and len(self.camera_keys) > self.num_image_slots:
            problems.append(f"data.camera_keys has {len(self.camera_keys)} cameras {self.camera_keys} but "
                            f"data.num_image_slots is {self.num_image_slots}; choose cameras with "
                            "data.camera_keys=[...] or raise the slots")
        if self.num_image_slots > MAX_CAMERAS:
            problems.append(f"data.num_image_slots: pi0.5 supports at most {MAX_CAMERAS} (got {self.num_image_slots})")
        if self.image_size[0] != self.image_size[1]:
            problems.append(f"data.image_size must be square for SigLIP (got {self.image_size})")
        if self.state_history != 1 or self.image_history != 1:
            problems.append("data.state_history and data.image_history must be 1 for pi0.5 (got "
                            f"{self.state_history}, {self.image_history})")
        return problems
