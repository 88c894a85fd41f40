"""GR00T N1.6 configuration: the ``model:`` and ``data:`` sections (no torch; ``--help`` reads these).

Defaults are the official sizes (nvidia/GR00T-N1.6-3B as LoongForge ``c6275661`` builds it): the backbone is
Eagle-Block2A-2B-v2 (a SigLIP2 vision tower of 27 layers at width 1152 with patch 14, a pixel-unshuffle 2x2 + MLP
projector, and a Qwen3-1.7B language model of width 2048 cut to its first ``select_layer`` = 16 layers), the action
head is LoongForge's ``Gr00tN1d6ActionHead`` (``vlln`` only, a 32-block AlternateVL DiT of 32 x 48 = 1536, output
1024, 32 embodiment slots, 128-d state and action, horizon 50). The tiny preset lives in ``groot_n1_6_tiny.yaml``.
README.md's "Reference fields" table says where each LoongForge field lives here; the settings LoongForge exposes
that this port implements at one value only are fields that refuse any other value.
"""

from __future__ import annotations

from typing import Literal

import attrs

from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_core.config.validators import non_negative, only, positive, probability
from embodied_models.groot_n1_6.embodiments import EMBODIMENT_SLOTS, NEW_EMBODIMENT, unknown_tag_message
from embodied_models.vla.checks import multiple_problems
from embodied_models.vla.fields import LocalTokenizerPath

__all__ = ["GrootN16DataConfig", "GrootN16ModelConfig"]


def _non_negative_items(instance: object, attribute: attrs.Attribute, value: list[int]) -> None:
    if any(v < 0 for v in value):
        raise ValueError(f"every entry must be >= 0 (got {value!r})")


@attrs.define(kw_only=True)
class GrootN16ModelConfig(BaseModelConfig):
    """GR00T N1.6 network sizes, trainability switches and flow-matching constants (official checkpoint's)."""

    # --- backbone: Qwen3 language model (Eagle-Block2A-2B-v2 text_config) ---
    vocab_size: int = attrs.field(default=151680, validator=positive)
    """Token embedding rows (Eagle's Qwen3-1.7B tokenizer with the image tokens: 151680)."""
    llm_width: int = attrs.field(default=2048, validator=positive)
    """Hidden width of the language model; also the backbone feature width the action head reads (LoongForge's
    backbone_embedding_dim)."""
    llm_mlp_dim: int = attrs.field(default=6144, validator=positive)
    """SwiGLU inner width of the language model."""
    llm_num_heads: int = attrs.field(default=16, validator=positive)
    """Query heads of the language model."""
    llm_num_kv_heads: int = attrs.field(default=8, validator=positive)
    """Key/value heads of the language model (grouped-query attention)."""
    llm_head_dim: int = attrs.field(default=128, validator=positive)
    """Per-head width of the language model."""
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
    vision_num_heads: int = attrs.field(default=16, validator=positive)
    """Vision attention heads."""
    vision_patch_size: int = attrs.field(default=14, validator=positive)
    """Vision patch side in pixels; views must be multiples of 2 x patch (the projector merges 2 x 2 patches)."""
    vision_num_patches: int = attrs.field(default=256, validator=positive)
    """Rows of the learned position table (a square grid, bilinearly resized to each image's patch grid)."""
    vision_window_size: int = attrs.field(default=14, validator=positive)
    """Side of the attention tiles (in patches) of windowed layers; also the base of the 2-D RoPE (LoongForge passes
    it as Rope2DPosEmb's theta_base)."""
    vision_full_attention_layers: list[int] = attrs.field(factory=lambda: [7, 14, 21, 26],
                                                          validator=_non_negative_items)
    """Layers that attend within the whole image when model.vision_windowed_attention is on (the others attend
    within their tile)."""
    vision_windowed_attention: bool = False
    """Tile-window attention in the layers outside model.vision_full_attention_layers (Eagle's use_windows_attn;
    off in the released backbone: every layer attends within its image)."""
    vision_rope: bool = False
    """2-D rotary embedding on the vision queries and keys (Eagle's use_rope; off in the released backbone)."""
    vision_layer_norm_eps: float = attrs.field(default=1e-6, validator=positive)
    """LayerNorm epsilon of the vision tower."""
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
    hidden_size: int = attrs.field(default=1024, validator=positive)
    """Width of the state encoder's hidden layer, the DiT output and the action decoder."""
    input_embedding_dim: int = attrs.field(default=1536, validator=positive)
    """Width of the state/action tokens (= DiT width = dit_num_heads x dit_head_dim)."""
    max_state_dim: int = attrs.field(default=128, validator=positive)
    """The state is zero-padded to this width."""
    max_action_dim: int = attrs.field(default=128, validator=positive)
    """Actions are zero-padded to this width."""
    action_horizon: int = attrs.field(default=50, validator=positive)
    """Action tokens the head denoises (N1.6: 50); data.action_horizon steps of them carry the data."""
    max_num_embodiments: int = attrs.field(default=32, validator=positive)
    """Embodiment slots of the category-specific encoders and decoder."""
    max_seq_len: int = attrs.field(default=1024, validator=positive)
    """Rows of the learned action position table (>= action_horizon)."""
    dit_num_layers: int = attrs.field(default=32, validator=positive)
    """DiT blocks: odd ones self-attend over [state; actions], even ones cross-attend to text or image tokens."""
    dit_num_heads: int = attrs.field(default=32, validator=positive)
    """DiT attention heads."""
    dit_head_dim: int = attrs.field(default=48, validator=positive)
    """DiT per-head width."""
    attend_text_every_n_blocks: int = attrs.field(default=2, validator=positive)
    """Cross-attention blocks alternate text and image tokens: block i attends text when i % (2 n) == 0."""
    dropout: float = attrs.field(default=0.2, validator=probability)
    """Dropout of the DiT blocks (attention output, FFN, final); torch's RNG draws it."""
    tune_projector: bool = True
    """Train the state encoder, action encoder, action decoder and action position table."""
    tune_diffusion_model: bool = True
    """Train the DiT."""
    tune_vlln: bool = True
    """Train the vlln LayerNorm over the backbone features."""
    # --- flow matching (GR00T time convention: t = 1 is data) ---
    noise_beta_alpha: float = attrs.field(default=1.5, validator=positive)
    """Training time t = (1 - Beta(alpha, beta)) * noise_s."""
    noise_beta_beta: float = attrs.field(default=1.0, validator=positive)
    """See noise_beta_alpha."""
    noise_s: float = attrs.field(default=0.999, validator=positive)
    """See noise_beta_alpha (t stays below 1)."""
    num_timestep_buckets: int = attrs.field(default=1000, validator=positive)
    """The network sees int(t * num_timestep_buckets), never the continuous t."""
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
    def dit_width(self) -> int:
        """Inner width of the DiT (heads x head_dim)."""
        return self.dit_num_heads * self.dit_head_dim

    @property
    def vision_head_dim(self) -> int:
        """Per-head width of the vision tower."""
        return self.vision_width // self.vision_num_heads

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = []
        if self.dit_width != self.input_embedding_dim:
            problems.append(f"model.dit_num_heads x model.dit_head_dim = {self.dit_width} must equal "
                            f"model.input_embedding_dim ({self.input_embedding_dim}): the DiT runs on the tokens")
        if self.input_embedding_dim % 2:
            problems.append(f"model.input_embedding_dim must be even for the sin-cos time features "
                            f"(got {self.input_embedding_dim})")
        problems += multiple_problems(self, ("llm_num_heads", "llm_num_kv_heads"), ("vision_width",
                                                                                  "vision_num_heads"))
        if self.vision_rope and self.vision_width % self.vision_num_heads == 0 and self.vision_head_dim % 4:
            problems.append(f"model.vision_width / model.vision_num_heads = {self.vision_head_dim} must be a multiple "
                            "of 4 for the 2-D RoPE (model.vision_rope=true)")
        side = round(self.vision_num_patches ** 0.5)
        if side * side != self.vision_num_patches:
            problems.append(f"model.vision_num_patches must be a square number (got {self.vision_num_patches})")
        bad = [i for i in self.vision_full_attention_layers if i >= self.vision_depth]
        if bad:
            problems.append(f"model.vision_full_attention_layers {bad} are not vision layers (model.vision_depth is "
                            f"{self.vision_depth})")
        if self.tune_top_llm_layers > self.select_layer:
            problems.append(f"model.tune_top_llm_layers {self.tune_top_llm_layers} exceeds model.select_layer "
                            f"{self.select_layer} (the language layers kept)")
        if self.max_seq_len < self.action_horizon:
            problems.append(f"model.max_seq_len {self.max_seq_len} is shorter than model.action_horizon "
                            f"{self.action_horizon} (one learned position per action token)")
        if len(self.image_mean) != 3 or len(self.image_std) != 3 or any(s <= 0 for s in self.image_std):
            problems.append(f"model.image_mean / model.image_std must be 3 values each, std > 0 (got "
                            f"{self.image_mean}, {self.image_std})")
        return problems


@attrs.define(kw_only=True)
class GrootN16DataConfig(LocalTokenizerPath, BaseDataConfig):
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
    shortest_image_edge: int | None = attrs.field(default=256, validator=positive)
    """Each frame's shorter side is resized to this before the centre crop (unset: data.image_size[0])."""
    crop_fraction: float = attrs.field(default=0.95, validator=probability)
    """Centre crop keeping this fraction of each side, then a resize to data.image_size (1: no crop)."""
    action_horizon: int = 16
    """Action steps taken from the data (<= model.action_horizon; LoongForge's preprocess_action_horizon); the
    loss covers only these."""
    normalization: Literal["min_max", "percentile", "mean_std", "none"] = "min_max"
    """State/action normalization per dimension from the dataset stats: min_max maps [min, max] to [-1, 1] (N1.6's
    StateActionProcessor default), percentile maps [q01, q99], mean_std is (x - mean) / std."""
    clip_outliers: bool = True
    """Clip min-max / percentile normalized values to [-1, 1] (GR00T's clip_outliers)."""
    embodiment_tag: str = NEW_EMBODIMENT
    """GR00T N1.6 embodiment tag selecting the category-specific encoder/decoder slot (new_embodiment: slot 10)."""
    embodiment_id: int | None = attrs.field(default=None, validator=attrs.validators.optional(non_negative))
    """Explicit projector slot; unset: the slot of data.embodiment_tag."""
    language_key: str = "task"
    """Sample key of the instruction (task, or an annotation.* key of the groot_n1_7 strategy)."""
    formalize_language: bool = True
    """Lower-case the instruction and drop punctuation (GR00T's formalize_language)."""
    mask_padded_actions: bool = False
    """Exclude horizon steps past the episode end (action_is_pad) from the loss; GR00T keeps them (the dataset
    repeats the last action), so the default keeps them too."""
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

    @property
    def resize_edge(self) -> int:
        """The shorter side frames are resized to before the crop."""
        return self.shortest_image_edge or self.image_size[0]

    def validate(self) -> list[str]:
        """Cross-field rules."""
        problems = super().validate()
        if self.embodiment_id is None and self.embodiment_tag not in EMBODIMENT_SLOTS:
            problems.append(unknown_tag_message(self.embodiment_tag))
        if self.state_history != 1:
            problems.append(f"data.state_history must be 1 for GR00T N1.6 (one state step; got {self.state_history})")
        if self.crop_fraction <= 0:
            problems.append(f"data.crop_fraction must be in (0, 1] (got {self.crop_fraction})")
        return problems
