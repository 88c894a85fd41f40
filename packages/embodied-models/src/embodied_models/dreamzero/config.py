"""The ``model:`` section of DreamZero: the causal chunked Wan DiT, its action head and the training recipe.

No torch here: ``embodied train --model-name dreamzero_tiny --help`` builds its parser from this class.
Sizes follow LoongForge's ``model_configuration_dreamzero.py`` (``_BACKBONE_PRESETS``) and the YAMLs
``configs/models/embodied/dreamzero_{wan22_5b,wan21_14b,libero_wan22_5b}.yaml`` (baidu-baige/LoongForge).
The ``data:`` section is ``embodied_models.dreamzero.data.config.DreamZeroDataConfig`` (the strategy's).

Geometry of one sample (the reference's invariants, checked by :meth:`DreamZeroModelConfig.validate`):
``num_frames = 4 * (latent_frames - 1) + 1`` video frames give ``latent_frames = 1 + max_chunk_size *
num_frame_per_block`` latent frames; each of the ``max_chunk_size`` blocks carries ``num_action_per_block``
actions and ``num_state_per_block`` states, so ``action_horizon == num_action_per_block`` actions per chunk.
"""

from __future__ import annotations

from typing import Any

import attrs

from embodied_core.config.model_config import BaseModelConfig
from embodied_core.config.validators import positive

__all__ = ["BACKBONE_VARIANTS", "MODEL_TYPES", "PARAM_ROUNDING_DTYPES", "VAE_TEMPORAL_DOWNSAMPLE",
           "DreamZeroModelConfig", "supported_only"]

BACKBONE_VARIANTS = ("wan22_5b", "wan21_14b", "tiny")
MODEL_TYPES = ("ti2v", "i2v")
VAE_TEMPORAL_DOWNSAMPLE = 4
"""The Wan VAEs turn 4 video frames into one latent frame (the first latent frame holds one frame)."""
PARAM_ROUNDING_DTYPES = ("bf16", "fp16")


def supported_only(value: object, why: str):
    """Validator of a LoongForge setting this port implements at one value only: any other value is an error
    naming the supported one and why (never silently replaced)."""

    def check(instance: object, attribute: attrs.Attribute, got: object) -> None:
        if got != value:
            raise ValueError(f"{got!r} is not supported; only {value!r} ({why})")

    return check


def _rounding_dtype(instance: object, attribute: attrs.Attribute, value: str | None) -> None:
    if value is not None and value not in PARAM_ROUNDING_DTYPES:
        raise ValueError(f"{value!r} is not a rounding dtype; valid: {', '.join(PARAM_ROUNDING_DTYPES)} (or unset: "
                         "no rounding)")


def _no_structured_cache(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if value is not None:
        raise ValueError("LoongForge's structured cache section is not read here; give the cache as data."
                         "precomputed_cache_dir, data.cache_template, data.cache_features and data.cache_validation "
                         "(see the dreamzero README, 'Reference fields')")


@attrs.define(kw_only=True)
class DreamZeroModelConfig(BaseModelConfig):
    """The DiT shape, the action head and the flow-matching recipe (defaults: Wan2.2-TI2V-5B, DROID geometry)."""

    backbone_variant: str = attrs.field(default="wan22_5b", validator=attrs.validators.in_(BACKBONE_VARIANTS))
    """Which Wan DiT the sizes describe (informational; the size fields below decide): wan22_5b, wan21_14b, tiny."""
    model_type: str = attrs.field(default="ti2v", validator=attrs.validators.in_(MODEL_TYPES))
    """'ti2v' (Wan2.2-TI2V-5B: latents only into the patch embedding) or 'i2v' (Wan2.1-I2V-14B: the first-frame
    latents and their mask are concatenated to the input channels). Both cross-attend to image-encoder tokens."""
    dim: int = attrs.field(default=3072, validator=positive)
    """Hidden width of the DiT."""
    ffn_dim: int = attrs.field(default=14336, validator=positive)
    """Hidden width of each block's feed-forward network."""
    num_heads: int = attrs.field(default=24, validator=positive)
    """Attention heads (head width dim / num_heads, even and >= 6 for the 3-D RoPE)."""
    num_layers: int = attrs.field(default=30, validator=positive)
    """Number of DiT blocks."""
    in_dim: int = attrs.field(default=48, validator=positive)
    """Input channels of the patch embedding (latent channels, + 4 mask + latent channels for 'i2v')."""
    out_dim: int = attrs.field(default=48, validator=positive)
    """Latent channels (the VAE z_dim) of the predicted video velocity."""
    patch_size: tuple[int, int, int] = (1, 2, 2)
    """(frame, height, width) patch of the latents; one token per patch."""
    freq_dim: int = attrs.field(default=256, validator=positive)
    """Sinusoidal timestep-embedding width."""
    text_dim: int = attrs.field(default=4096, validator=positive)
    """Width of the text-encoder output (UMT5-XXL: 4096)."""
    text_len: int = attrs.field(default=512, validator=positive)
    """Text positions the DiT sees: the strategy's UMT5 token ids / ``prompt_embs`` rows (must equal
    ``data.max_text_length``)."""
    image_dim: int = attrs.field(default=1280, validator=positive)
    """Width of the image-encoder tokens (CLIP ViT-H/14: 1280)."""
    eps: float = attrs.field(default=1e-6, validator=positive)
    """Epsilon of the layer and RMS norms."""
    rope_theta: float = attrs.field(default=10000.0, validator=positive)
    """RoPE base frequency (video 3-D, action and state 1-D)."""

    # ---------------------------------------------------------------- action head and chunk geometry
    num_frames: int = attrs.field(default=33, validator=positive)
    """Video frames per sample (1 + 4k); the strategy reads it."""
    action_horizon: int = attrs.field(default=24, validator=positive)
    """Actions per chunk; the strategy reads it (must equal num_action_per_block)."""
    num_frame_per_block: int = attrs.field(default=2, validator=positive)
    """Latent frames per causal block (chunk)."""
    num_action_per_block: int = attrs.field(default=24, validator=positive)
    """Action tokens per block."""
    num_state_per_block: int = attrs.field(default=1, validator=positive)
    """State tokens per block."""
    max_chunk_size: int = attrs.field(default=4, validator=positive)
    """Blocks per sample; also the local attention window of the clean video (max_chunk_size * num_frame_per_block
    + 1 frames), as the reference."""
    max_state_dim: int = attrs.field(default=64, validator=positive)
    """State width after padding (the strategy pads to it and masks the padding)."""
    max_action_dim: int = attrs.field(default=32, validator=positive)
    """Action width after padding."""
    action_state_hidden_size: int = attrs.field(default=1024, validator=positive)
    """Hidden width of the state encoder and action decoder MLPs (the reference's dit_action_state_hidden_size)."""
    num_embodiments: int = attrs.field(default=1, validator=positive)
    """Categories of the per-embodiment encoders/decoder. The reference builds 1 and routes every sample to it
    (its checkpoints hold one slice); > 1 routes each sample by ``embodiment_id`` (must be < num_embodiments)."""
    action_loss_embodiment_ids: list[int] | None = None
    """Embodiment ids whose action loss counts (LoongForge's libero recipe: [21]); unset: all samples."""

    # ---------------------------------------------------------------- flow matching
    num_train_timesteps: int = attrs.field(default=1000, validator=positive)
    """Size of the discrete training schedule."""
    shift: float = attrs.field(default=5.0, validator=positive)
    """Sigma shift of the training schedule: s*sigma / (1 + (s-1)*sigma)."""
    decouple_video_action_noise: bool = False
    """Draw video timesteps from Beta(video_noise_beta_alpha, video_noise_beta_beta) and action timesteps
    uniformly on their own (the reference's switch); default: uniform ids, actions share their block's id."""
    video_noise_beta_alpha: float = attrs.field(default=3.0, validator=positive)
    """Beta alpha of the video noise ratio with decouple_video_action_noise."""
    video_noise_beta_beta: float = attrs.field(default=1.0, validator=positive)
    """Beta beta of the video noise ratio with decouple_video_action_noise."""
    num_inference_steps: int = attrs.field(default=16, validator=positive)
    """Euler steps of sample_actions."""
    sigma_shift: float = attrs.field(default=5.0, validator=positive)
    """Sigma shift of the inference schedule."""
    per_sample_prompt_mask: bool = True
    """Zero each prompt's embedding rows past its own length. The reference zeroes rows past *every* sample's
    length for the whole batch (a bug: a short prompt truncates the others); false reproduces that."""

    # ---------------------------------------------------------------- frozen encoders (online path)
    online_encoders: bool = True
    """Hold the frozen VAE, UMT5 and image encoder in the model, so batches without the cache fields
    (``video_latents``, ``prompt_embs``, ``first_frame_latents``) are encoded on the fly. The image encoder runs in
    both paths (its tokens are not cached, as in the reference)."""
    vae_path: str | None = None
    """Local diffusers ``AutoencoderKLWan`` folder (``vae/`` of Wan2.2-TI2V-5B-Diffusers or Wan2.1-I2V-14B-Diffusers);
    unset: built from vae_config with random weights (tests)."""
    vae_config: dict[str, Any] | None = None
    """``AutoencoderKLWan`` constructor arguments when vae_path is unset; unset: the Wan2.2 (z 48) or Wan2.1 (z 16)
    defaults by model_type."""
    text_encoder_path: str | None = None
    """Local ``UMT5EncoderModel`` folder (``text_encoder/`` of a Wan diffusers release); unset: text_encoder_config."""
    text_encoder_config: dict[str, Any] | None = None
    """``UMT5Config`` arguments when text_encoder_path is unset; unset: UMT5-XXL's shape."""
    image_encoder_path: str | None = None
    """Local ``CLIPVisionModel`` folder (``image_encoder/`` of Wan2.1-I2V-14B-Diffusers); unset:
    image_encoder_config."""
    image_encoder_config: dict[str, Any] | None = None
    """``CLIPVisionConfig`` arguments when image_encoder_path is unset; unset: ViT-H/14 at 224 px."""
    target_video_size: tuple[int, int] | None = (160, 320)
    """(height, width) frames are resized to before the online VAE (the reference's 5B target 160x320; unset:
    frames as they come)."""

    # ---------------------------------------------------------------- checkpoints and memory
    pretrained_layout: str = attrs.field(default="diffusers",
                                         validator=attrs.validators.in_(("diffusers", "wan", "loongforge",
                                                                         "embodied")))
    """Layout of --pretrained-checkpoint: 'diffusers' (Wan DiT shards, renamed), 'wan' (original Wan names),
    'loongforge' (a DreamZero checkpoint, ``action_head.model.*``) or 'embodied' (our own)."""
    gradient_checkpointing: bool = False
    """Recompute each DiT block in backward (the recipes use --activation-checkpointing instead)."""
    fsdp_initial_param_rounding_dtype: str | None = attrs.field(default=None, validator=_rounding_dtype)
    """Round every trainable parameter once through this dtype (bf16 or fp16) before the first step of a fresh run
    (not on resume), as LoongForge does by default (its default: bf16); unset: no rounding."""

    # ---------------------------------------------------------------- LoongForge settings with one supported value
    num_dit_steps: int = attrs.field(default=1, validator=supported_only(
        1, "sample_actions runs the DiT at every Euler step; LoongForge's 5-8 reuse earlier predictions on fixed "
           "step masks, which is not implemented"))
    """LoongForge's inference DiT-step skipping; only 1 (the DiT runs at every step)."""
    vae_tiled: bool = attrs.field(default=False, validator=supported_only(
        False, "the online VAE encodes whole frames; LoongForge's tiled encoding is not implemented"))
    """LoongForge's tiled VAE encoding; only false."""
    precomputed_cache: dict[str, Any] | None = attrs.field(default=None, validator=_no_structured_cache)
    """Rejected: LoongForge's structured cache section; the cache is described by data.precomputed_cache_dir,
    data.cache_template, data.cache_features and data.cache_validation."""

    @property
    def head_dim(self) -> int:
        """Channels per attention head."""
        return self.dim // self.num_heads

    @property
    def latent_frames(self) -> int:
        """Latent frames per sample."""
        return (self.num_frames - 1) // VAE_TEMPORAL_DOWNSAMPLE + 1

    @property
    def local_attn_frames(self) -> int:
        """The clean video's attention window in latent frames (the reference's local_attn_size)."""
        return self.max_chunk_size * self.num_frame_per_block + 1

    def validate(self) -> list[str]:
        """The reference's geometry invariants (frames, blocks, actions and states per block)."""
        problems = []
        if self.dim % self.num_heads or (self.dim // self.num_heads) % 2:
            problems.append(f"model.dim {self.dim} / model.num_heads {self.num_heads}: the head width must be an even "
                            "integer")
        if (self.num_frames - 1) % VAE_TEMPORAL_DOWNSAMPLE:
            problems.append(f"model.num_frames {self.num_frames}: must be 1 + 4k (the VAE's temporal compression)")
        expected = 1 + self.max_chunk_size * self.num_frame_per_block
        if self.latent_frames != expected:
            problems.append(f"model.num_frames {self.num_frames} gives {self.latent_frames} latent frames, but "
                            f"1 + max_chunk_size ({self.max_chunk_size}) * num_frame_per_block "
                            f"({self.num_frame_per_block}) = {expected}; set num_frames = "
                            f"{4 * (expected - 1) + 1}")
        if self.action_horizon != self.num_action_per_block:
            problems.append(f"model.action_horizon {self.action_horizon} != model.num_action_per_block "
                            f"{self.num_action_per_block}: each block carries one action chunk")
        if self.num_frame_per_block % self.num_state_per_block:
            problems.append(f"model.num_frame_per_block {self.num_frame_per_block} must be a multiple of "
                            f"model.num_state_per_block {self.num_state_per_block}")
        if self.num_action_per_block % self.num_state_per_block:
            problems.append(f"model.num_action_per_block {self.num_action_per_block} must be a multiple of "
                            f"model.num_state_per_block {self.num_state_per_block}")
        z = self.out_dim
        want_in = z if self.model_type == "ti2v" else 2 * z + 4
        if self.in_dim != want_in:
            problems.append(f"model.in_dim {self.in_dim}: model_type {self.model_type!r} with out_dim {z} needs "
                            f"{want_in} ({'latents' if self.model_type == 'ti2v' else 'latents + 4 mask + latents'})")
        if self.action_loss_embodiment_ids is not None and not self.action_loss_embodiment_ids:
            problems.append("model.action_loss_embodiment_ids: empty; leave it unset to count every sample")
        return problems
