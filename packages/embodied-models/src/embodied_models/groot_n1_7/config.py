"""GR00T N1.7 configuration: the ``model:`` and ``data:`` sections (no torch; ``--help`` reads these).

Defaults are the official sizes: the backbone is Cosmos-Reason2-2B (a Qwen3-VL 2B: 24-block vision tower, 28
language layers of width 2048, of which GR00T keeps the first ``select_layer`` = 16), the action head is lerobot
0.6.1's / Isaac-GR00T's ``GR00TN17ActionHead`` (4 VL self-attention blocks at 2048, a 32-block AlternateVL DiT of
32 x 48 = 1536, output 1024, 32 embodiment slots, 132-d state and action, horizon 40). The tiny preset lives in
``groot_n1_7_tiny.yaml``. The fields and rules N1.6 declares alike are ``embodied_models.groot.config``'s, placed
where this section always listed them.
"""

from __future__ import annotations

from typing import Literal

import attrs

from embodied_core.config.validators import non_negative, positive, probability
from embodied_models.groot.config import (
    SharedDataFields,
    SharedModelFields,
    data_field_order,
    model_field_order,
    non_negative_items,
)
from embodied_models.groot_n1_7.embodiments import EMBODIMENT_SLOTS, NEW_EMBODIMENT, unknown_tag_message
from embodied_models.vla.checks import multiple_problems
from embodied_models.vla.fields import LocalTokenizerPath

__all__ = ["GrootDataConfig", "GrootModelConfig"]


@attrs.define(kw_only=True, field_transformer=model_field_order(
    tokens_after="tune_visual", alternation_after="vl_head_dim", flow_after="state_dropout_prob"))
class GrootModelConfig(SharedModelFields):
    """GR00T N1.7 network sizes and flow-matching constants. Defaults are the official checkpoint's."""

    # --- backbone: Qwen3-VL language model (Cosmos-Reason2-2B) ---
    vocab_size: int = attrs.field(default=151936, validator=positive)
    """Token embedding rows of the Qwen3-VL tokenizer (Cosmos-Reason2-2B: 151936)."""
    llm_width: int = attrs.field(default=2048, validator=positive)
    """Hidden width of the language model; also the backbone feature width the action head reads."""
    # (here: llm_mlp_dim, llm_num_heads, llm_num_kv_heads, llm_head_dim from groot.config)
    select_layer: int = attrs.field(default=16, validator=positive)
    """Language layers kept (GR00T's select_layer): the backbone is built with only these, and its features are
    the output of the last one (before the final RMSNorm, which GR00T never applies)."""
    rms_norm_eps: float = attrs.field(default=1e-6, validator=positive)
    """RMSNorm epsilon of the language model."""
    rope_theta: float = attrs.field(default=5_000_000.0, validator=positive)
    """RoPE base of the language model."""
    mrope_section: list[int] = attrs.field(factory=lambda: [24, 20, 20], validator=non_negative_items)
    """Interleaved multimodal RoPE split (temporal, height, width) of the head's rotary half; sums to
    llm_head_dim / 2."""
    # --- backbone: Qwen3-VL vision tower ---
    vision_depth: int = attrs.field(default=24, validator=positive)
    """Vision transformer blocks."""
    vision_width: int = attrs.field(default=1024, validator=positive)
    """Vision transformer width."""
    vision_mlp_dim: int = attrs.field(default=4096, validator=positive)
    """Vision MLP width."""
    # (here: vision_num_heads from groot.config)
    vision_patch_size: int = attrs.field(default=16, validator=positive)
    """Vision patch side in pixels (must match the processor's patch_size)."""
    vision_temporal_patch_size: int = attrs.field(default=2, validator=positive)
    """Frames per vision patch (a still image is repeated to fill it, as the Qwen3-VL processor does)."""
    vision_merge_size: int = attrs.field(default=2, validator=positive)
    """Patches merged per side into one language token (2: four patches per token)."""
    vision_num_position_embeddings: int = attrs.field(default=2304, validator=positive)
    """Learned position table of the vision tower (a square grid; interpolated to each image's grid)."""
    deepstack_layers: list[int] = attrs.field(factory=lambda: [5, 11, 17], validator=non_negative_items)
    """Vision blocks whose merged features are added to the image tokens after language layers 0, 1, 2, ...
    (Qwen3-VL DeepStack)."""
    image_mean: list[float] = attrs.field(factory=lambda: [0.5, 0.5, 0.5])
    """Per-channel mean of the pixel normalization (the processor's image_mean)."""
    image_std: list[float] = attrs.field(factory=lambda: [0.5, 0.5, 0.5])
    """Per-channel std of the pixel normalization (the processor's image_std)."""
    tune_llm: bool = False
    """Train the language layers and token embeddings (GR00T default: frozen)."""
    tune_visual: bool = False
    """Train the vision tower (GR00T default: frozen)."""
    # --- action head ---
    # (here: hidden_size, input_embedding_dim from groot.config)
    max_state_dim: int = attrs.field(default=132, validator=positive)
    """The state is zero-padded to this width."""
    max_action_dim: int = attrs.field(default=132, validator=positive)
    """Actions are zero-padded to this width."""
    action_horizon: int = attrs.field(default=40, validator=positive)
    """Action tokens the head denoises (GR00T N1.7: 40); data.action_horizon steps of them carry the data."""
    # (here: max_num_embodiments, max_seq_len, dit_num_layers, dit_num_heads, dit_head_dim from groot.config)
    vl_num_layers: int = attrs.field(default=4, validator=non_negative)
    """VL self-attention blocks over the backbone features (0: none)."""
    vl_num_heads: int = attrs.field(default=32, validator=positive)
    """VL self-attention heads (vl_num_heads x vl_head_dim = llm_width)."""
    vl_head_dim: int = attrs.field(default=64, validator=positive)
    """VL self-attention per-head width."""
    # (here: attend_text_every_n_blocks from groot.config)
    dropout: float = attrs.field(default=0.2, validator=probability)
    """Dropout of the DiT and VL self-attention blocks (attention output, FFN, final); torch's RNG draws it."""
    state_dropout_prob: float = attrs.field(default=0.2, validator=probability)
    """Training only: probability of zeroing a sample's state token (drawn from the model's generator)."""
    # --- flow matching (GR00T time convention: t = 1 is data) ---
    # (here: noise_beta_alpha, noise_beta_beta, noise_s, num_timestep_buckets from groot.config)
    num_inference_steps: int = attrs.field(default=4, validator=positive)
    """Euler steps of sample_actions (t from 0 to 1)."""
    # --- execution ---
    gradient_checkpointing: bool = False
    """Recompute the DiT / VL self-attention blocks and trainable backbone layers in backward."""
    processor: Literal["qwen3_vl", "tiny"] = "qwen3_vl"
    """Prompt and image preprocessing: the Qwen3-VL tokenizer, chat template and image settings of a local
    processor folder (data.tokenizer_path / --tokenizer-path, e.g. a download of nvidia/Cosmos-Reason2-2B), or the
    built-in byte-level tiny processor of groot_n1_7_tiny (no files; a folder, when given, wins)."""

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = self.token_problems()
        if self.vl_num_layers and self.vl_num_heads * self.vl_head_dim != self.llm_width:
            problems.append(f"model.vl_num_heads x model.vl_head_dim = {self.vl_num_heads * self.vl_head_dim} must "
                            f"equal model.llm_width ({self.llm_width}): the VL self-attention runs on the features")
        problems += multiple_problems(self, ("llm_num_heads", "llm_num_kv_heads"))
        if sum(self.mrope_section) * 2 != self.llm_head_dim or len(self.mrope_section) != 3:
            problems.append(f"model.mrope_section {self.mrope_section} must be 3 numbers summing to "
                            f"model.llm_head_dim / 2 = {self.llm_head_dim / 2:g}")
        problems += multiple_problems(self, ("vision_width", "vision_num_heads"))
        bad_deepstack = [i for i in self.deepstack_layers if i >= self.vision_depth]
        if bad_deepstack:
            problems.append(f"model.deepstack_layers {bad_deepstack} are not vision blocks (model.vision_depth is "
                            f"{self.vision_depth})")
        return problems + self.square_problems("vision_num_position_embeddings") + self.table_problems()


@attrs.define(kw_only=True, field_transformer=data_field_order())
class GrootDataConfig(LocalTokenizerPath, SharedDataFields):
    """What GR00T N1.7 asks of the data (official N1.7 processor defaults: 256 px views, percentile min-max
    normalization clipped to [-1, 1], lower-cased task text without punctuation).

    With ``--dataset-strategy groot_n1_7`` (meta/modality.json) the cameras may be named by their modality video
    names (``video.front_view``); the groot_n1_7 trainer writes dataset camera keys in that form.
    """

    camera_keys: list[str] | None = None
    """Camera keys in view order (every view is required); unset: the dataset's cameras in declared order."""
    image_size: tuple[int, int] = (256, 256)
    """(height, width) of each view after GR00T's resize and crop (multiples of patch x merge = 32)."""
    # (here: shortest_image_edge, crop_fraction from groot.config)
    action_horizon: int = 16
    """Action steps taken from the data (<= model.action_horizon); the loss covers only these."""
    normalization: Literal["percentile", "min_max", "mean_std", "none"] = "percentile"
    """State/action normalization per dimension from the dataset stats: percentile maps [q01, q99] to [-1, 1]
    (GR00T N1.7's use_percentiles), min_max maps [min, max] to [-1, 1], mean_std is (x - mean) / std."""
    # (here: clip_outliers from groot.config)
    embodiment_tag: str = NEW_EMBODIMENT
    """GR00T embodiment tag selecting the category-specific encoder/decoder slot (new_embodiment: slot 10)."""
    # (here: embodiment_id, language_key, formalize_language, mask_padded_actions from groot.config)
    tokenizer_path: str | None = None
    """Local Qwen3-VL processor folder (tokenizer, chat template, preprocessor_config.json); falls back to
    --tokenizer-path (env TOKENIZER_PATH)."""

    def embodiment_fields(self, tag: str) -> dict[str, str]:
        """A dataset-mixture entry's ``embodiment`` tag as this section's ``embodiment_tag`` when it is a GR00T tag
        (its projector slot); another tag only labels the entry's statistics (embodied_core.config.mixture)."""
        return {"embodiment_tag": tag} if tag in EMBODIMENT_SLOTS else {}

    def validate(self) -> list[str]:
        """Cross-field rules."""
        return self.shared_problems(slots=EMBODIMENT_SLOTS, unknown_tag=unknown_tag_message, label="GR00T N1.7",
                                    state_note="state_history_length 1")
