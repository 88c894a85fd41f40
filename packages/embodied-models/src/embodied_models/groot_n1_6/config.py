"""GR00T N1.6 configuration: the ``model:`` and ``data:`` sections (no torch; ``--help`` reads these).

Defaults are the official sizes (nvidia/GR00T-N1.6-3B as LoongForge ``c6275661`` builds it): the backbone is
Eagle-Block2A-2B-v2 (a SigLIP2 vision tower of 27 layers at width 1152 with patch 14, a pixel-unshuffle 2x2 + MLP
projector, and a Qwen3-1.7B language model of width 2048 cut to its first ``select_layer`` = 16 layers), the action
head is LoongForge's ``Gr00tN1d6ActionHead`` (``vlln`` only, a 32-block AlternateVL DiT of 32 x 48 = 1536, output
1024, 32 embodiment slots, 128-d state and action, horizon 50). The tiny preset lives in ``groot_n1_6_tiny.yaml``.
README.md's "Reference fields" table says where each LoongForge field lives here; the settings LoongForge exposes
that this port implements at one value only are fields that refuse any other value. The fields and rules N1.7
declares alike are ``embodied_models.groot.config``'s, placed where this section always listed them.
"""

from __future__ import annotations

from typing import Literal

import attrs

from embodied_core.config.validators import non_negative, only, positive, probability
from embodied_models.groot.config import (
    SharedDataFields,
    SharedModelFields,
    data_field_order,
    model_field_order,
    non_negative_items,
)
from embodied_models.groot_n1_6.embodiments import EMBODIMENT_SLOTS, NEW_EMBODIMENT, unknown_tag_message
from embodied_models.vla.checks import multiple_problems
from embodied_models.vla.fields import LocalTokenizerPath

__all__ = ["GrootN16DataConfig", "GrootN16ModelConfig"]


@attrs.define(kw_only=True, field_transformer=model_field_order(
    tokens_after="tune_top_llm_layers", alternation_after="dit_head_dim", flow_after="tune_vlln"))
class GrootN16ModelConfig(SharedModelFields):
    """GR00T N1.6 network sizes, trainability switches and flow-matching constants (official checkpoint's)."""

    # --- backbone: Qwen3 language model (Eagle-Block2A-2B-v2 text_config) ---
    vocab_size: int = attrs.field(default=151680, validator=positive)
    """Token embedding rows (Eagle's Qwen3-1.7B tokenizer with the image tokens: 151680)."""
    llm_width: int = attrs.field(default=2048, validator=positive)
    """Hidden width of the language model; also the backbone feature width the action head reads (LoongForge's
    backbone_embedding_dim)."""
    # (here: llm_mlp_dim, llm_num_heads, llm_num_kv_heads, llm_head_dim from groot.config)
    select_layer: int = attrs.field(default=16, validator=positive)
    """Language layers kept: the backbone is built with only these, and its features are the final RMSNorm of the
    last one (the later layers are popped, as LoongForge does)."""
    rms_norm_eps: float = attrs.field(default=1e-6, validator=positive)
    """RMSNorm epsilon of the language model (also of the per-head q/k norms)."""
    rope_theta: float = attrs.field(default=1_000_000.0, validator=positive)
    """RoPE base of the language model."""
    # --- backbone: SigLIP2 vision tower (Eagle-Block2A-2B-v2 vision_config) ---
    vision_depth: int = attrs.field(default=27, validator=positive)
    """Vision encoder layers."""
    vision_width: int = attrs.field(default=1152, validator=positive)
    """Vision encoder width."""
    vision_mlp_dim: int = attrs.field(default=4304, validator=positive)
    """Vision MLP width."""
    # (here: vision_num_heads from groot.config)
    vision_patch_size: int = attrs.field(default=14, validator=positive)
    """Vision patch side in pixels; views must be multiples of 2 x patch (the projector merges 2 x 2 patches)."""
    vision_num_patches: int = attrs.field(default=256, validator=positive)
    """Rows of the learned position table (a square grid, bilinearly resized to each image's patch grid)."""
    vision_window_size: int = attrs.field(default=14, validator=positive)
    """Side of the attention tiles (in patches) of windowed layers; also the base of the 2-D RoPE (LoongForge passes
    it as Rope2DPosEmb's theta_base)."""
    vision_full_attention_layers: list[int] = attrs.field(factory=lambda: [7, 14, 21, 26],
                                                          validator=non_negative_items)
    """Layers that attend within the whole image when model.vision_windowed_attention is on (the others attend
    within their tile)."""
    vision_windowed_attention: bool = False
    """Tile-window attention in the layers outside model.vision_full_attention_layers (Eagle's use_windows_attn;
    off in the released backbone: every layer attends within its image)."""
    vision_rope: bool = False
    """2-D rotary embedding on the vision queries and keys (Eagle's use_rope; off in the released backbone)."""
    vision_layer_norm_eps: float = attrs.field(default=1e-6, validator=positive)
    """LayerNorm epsilon of the vision tower."""
    vision_pooling_head: bool = True
    """Build SigLIP2's attention-pooling head (backbone.vision.head.*, transformers'
    Siglip2MultiheadAttentionPoolingHead; 15,238,352 parameters at the official size), as the official module and
    its checkpoints have it. Eagle never reads it: it never runs and is always frozen, whatever model.tune_visual
    says. False leaves it out (for a checkpoint without it; an official checkpoint's head is then dropped as
    declared)."""
    vision_select_layer: int = attrs.field(default=-1, validator=only(
        -1, why="the projector reads the tower's output after post_layernorm; Eagle's other select_layer values "
                "take an earlier hidden state that is still in tile order"))
    """Vision hidden state fed to the projector (Eagle's select_layer); only -1, the released value."""
    downsample_ratio: float = attrs.field(default=0.5, validator=only(
        0.5, why="the projector is a 2 x 2 pixel unshuffle (mlp1 reads 4 x vision_width channels)"))
    """Eagle's projector downsampling; only 0.5."""
    image_mean: list[float] = attrs.field(factory=lambda: [0.5, 0.5, 0.5])
    """Per-channel mean of the pixel normalization (Eagle3VLImageProcessorFast's image_mean)."""
    image_std: list[float] = attrs.field(factory=lambda: [0.5, 0.5, 0.5])
    """Per-channel std of the pixel normalization (the image processor's image_std)."""
    tune_llm: bool = False
    """Train the whole language model: token embeddings, every kept layer, the final norm (N1.6 default: frozen)."""
    tune_visual: bool = False
    """Train the vision tower and the projector (mlp1) (N1.6 default: frozen)."""
    tune_top_llm_layers: int = attrs.field(default=4, validator=non_negative)
    """The last this many kept language layers are trained even with model.tune_llm=false (N1.6: 4)."""
    # --- action head ---
    # (here: hidden_size, input_embedding_dim from groot.config)
    max_state_dim: int = attrs.field(default=128, validator=positive)
    """The state is zero-padded to this width."""
    max_action_dim: int = attrs.field(default=128, validator=positive)
    """Actions are zero-padded to this width."""
    action_horizon: int = attrs.field(default=50, validator=positive)
    """Action tokens the head denoises (N1.6: 50); data.action_horizon steps of them carry the data."""
    # (here: max_num_embodiments, max_seq_len, dit_num_layers, dit_num_heads, dit_head_dim,
    # attend_text_every_n_blocks from groot.config)
    dropout: float = attrs.field(default=0.2, validator=probability)
    """Dropout of the DiT blocks (attention output, FFN, final); torch's RNG draws it."""
    tune_projector: bool = True
    """Train the state encoder, action encoder, action decoder and action position table."""
    tune_diffusion_model: bool = True
    """Train the DiT."""
    tune_vlln: bool = True
    """Train the vlln LayerNorm over the backbone features."""
    # --- flow matching (GR00T time convention: t = 1 is data) ---
    # (here: noise_beta_alpha, noise_beta_beta, noise_s, num_timestep_buckets from groot.config)
    num_inference_steps: int = attrs.field(default=4, validator=positive)
    """Euler steps of sample_actions (t from 0 to 1); LoongForge's num_inference_timesteps."""
    # --- execution ---
    gradient_checkpointing: bool = False
    """Recompute the DiT blocks and trainable backbone layers in backward."""
    processor: Literal["eagle", "tiny"] = "eagle"
    """Prompt and image settings: the tokenizer, chat template and processor / image-processor settings of a local
    Eagle processor folder (data.tokenizer_path / --tokenizer-path, e.g. a download of
    aravindhs-NV/eagle3-processor-groot-n1d6), or the built-in byte-level tiny processor of groot_n1_6_tiny (no
    files; a folder, when given, wins)."""
    # --- LoongForge settings with one supported value (README "Reference fields") ---
    use_alternate_vl_dit: bool = attrs.field(default=True, validator=only(
        True, why="the DiT without the text/image alternation (LoongForge's plain DiT) is not ported"))
    """LoongForge's DiT choice; only true (AlternateVL DiT)."""
    use_vlln: bool = attrs.field(default=True, validator=only(
        True, why="the released checkpoint has the vlln LayerNorm; an identity in its place is not ported"))
    """LayerNorm over the backbone features; only true."""
    add_pos_embed: bool = attrs.field(default=True, validator=only(
        True, why="the released checkpoint has the learned action position table"))
    """Learned positions on the action tokens; only true."""
    state_dropout_prob: float = attrs.field(default=0.0, validator=only(
        0.0, why="LoongForge's state dropout adds a mask_token the released checkpoint lacks and also drops in eval "
                 "mode; not ported"))
    """Probability of replacing the state token by a learned mask token; only 0.0 (N1.6's default)."""
    state_additive_noise_scale: float = attrs.field(default=0.0, validator=only(
        0.0, why="Gaussian noise on the state token in training is not ported"))
    """Scale of Gaussian noise added to the state token in training; only 0.0 (N1.6's default)."""

    @property
    def vision_head_dim(self) -> int:
        """Per-head width of the vision tower."""
        return self.vision_width // self.vision_num_heads

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = self.token_problems()
        problems += multiple_problems(self, ("llm_num_heads", "llm_num_kv_heads"), ("vision_width",
                                                                                  "vision_num_heads"))
        if self.vision_rope and self.vision_width % self.vision_num_heads == 0 and self.vision_head_dim % 4:
            problems.append(f"model.vision_width / model.vision_num_heads = {self.vision_head_dim} must be a multiple "
                            "of 4 for the 2-D RoPE (model.vision_rope=true)")
        problems += self.square_problems("vision_num_patches")
        bad = [i for i in self.vision_full_attention_layers if i >= self.vision_depth]
        if bad:
            problems.append(f"model.vision_full_attention_layers {bad} are not vision layers (model.vision_depth is "
                            f"{self.vision_depth})")
        if self.tune_top_llm_layers > self.select_layer:
            problems.append(f"model.tune_top_llm_layers {self.tune_top_llm_layers} exceeds model.select_layer "
                            f"{self.select_layer} (the language layers kept)")
        return problems + self.table_problems()


@attrs.define(kw_only=True, field_transformer=data_field_order())
class GrootN16DataConfig(LocalTokenizerPath, SharedDataFields):
    """What GR00T N1.6 asks of the data (LoongForge's N1.6 eval geometry: shortest edge 256, centre crop 0.95, 252 x
    252 views; per-dimension min-max normalization clipped to [-1, 1]; lower-cased task text without punctuation).

    Plain LeRobot datasets use the default strategy; datasets with GR00T's ``meta/modality.json`` may use
    ``--dataset-strategy groot_n1_7`` as well (the cameras are then named by their modality video keys).
    """

    camera_keys: list[str] | None = None
    """Camera keys in view order (every view is required); unset: the dataset's cameras in declared order
    (LoongForge sorts them by name: set this list in that order to reuse a LoongForge-trained checkpoint)."""
    image_size: tuple[int, int] = (252, 252)
    """(height, width) of each view after the resize and crop; multiples of 2 x model.vision_patch_size (28). 252
    is what Eagle's processor makes of LoongForge's 256-pixel crops (smart_resize to multiples of 28)."""
    # (here: shortest_image_edge, crop_fraction from groot.config)
    action_horizon: int = 16
    """Action steps taken from the data (<= model.action_horizon; LoongForge's preprocess_action_horizon); the
    loss covers only these."""
    normalization: Literal["min_max", "percentile", "mean_std", "none"] = "min_max"
    """State/action normalization per dimension from the dataset stats: min_max maps [min, max] to [-1, 1] (N1.6's
    StateActionProcessor default), percentile maps [q01, q99], mean_std is (x - mean) / std."""
    # (here: clip_outliers from groot.config)
    embodiment_tag: str = NEW_EMBODIMENT
    """GR00T N1.6 embodiment tag selecting the category-specific encoder/decoder slot (new_embodiment: slot 10)."""
    # (here: embodiment_id, language_key, formalize_language, mask_padded_actions from groot.config)
    tokenizer_path: str | None = None
    """Local Eagle processor folder (tokenizer, chat template, processor_config.json, preprocessor_config.json);
    falls back to --tokenizer-path (env TOKENIZER_PATH)."""
    # --- LoongForge settings with one supported value (README "Reference fields") ---
    use_albumentations_transforms: bool = attrs.field(default=True, validator=only(
        True, why="the views follow LoongForge's albumentations geometry (resize, crop, resize); its torchvision "
                  "alternative (letterbox to square first) is not ported"))
    """LoongForge's choice of image pipeline; only true."""
    color_jitter_params: dict[str, float] | None = attrs.field(default=None, validator=only(
        None, why="training views are augmented by data.image_augmentation (e.g. ops random_crop scale 0.95, resize, "
                  "color_jitter brightness 0.3 contrast 0.4 saturation 0.5 hue 0.08: LoongForge's defaults)"))
    """LoongForge's colour jitter of training views; only unset (use data.image_augmentation)."""
    random_rotation_angle: int | None = attrs.field(default=None, validator=only(
        None, why="training views are augmented by data.image_augmentation (op random_rotation)"))
    """LoongForge's random rotation of training views; only unset (use data.image_augmentation)."""
    apply_sincos_state_encoding: bool = attrs.field(default=False, validator=only(
        False, why="sin-cos encoding of state keys is not implemented"))
    """Sin-cos encoding of selected state keys; only false (N1.6's default)."""
    use_relative_action: bool = attrs.field(default=False, validator=only(
        False, why="relative actions need per-embodiment modality configs and relative-action statistics, which "
                   "this port does not have; actions are absolute, normalized per dimension"))
    """Relative action keys (LoongForge's default true only acts on its built-in embodiment layouts); only false."""
    use_processor_image_size: bool = attrs.field(default=False, validator=only(
        False, why="the views are always resized and cropped to data.image_size"))
    """Skip the view geometry and let the processor size the images; only false (N1.6's default)."""

    def validate(self) -> list[str]:
        """Cross-field rules."""
        return self.shared_problems(slots=EMBODIMENT_SLOTS, unknown_tag=unknown_tag_message, label="GR00T N1.6",
                                    state_note="one state step")
