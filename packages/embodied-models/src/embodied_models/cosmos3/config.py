"""Cosmos3 configuration: the ``model:`` section (no torch; ``--help`` reads it).

Defaults are the sizes of NVIDIA's Cosmos3 action policy as LoongForge trains it (``cosmos3_nano``): the
Qwen3-VL-8B text stack as a mixture of transformers (an understanding and a generation copy of every layer), the
Wan2.2 VAE (48 latent channels, 4x16x16 compression), domain-aware action projections of width 64 over 32
embodiment domains, unified 3-D mRoPE with fps modulation, rectified flow with shift 5. The ``data:`` section is
``embodied_models.cosmos3.data.config.Cosmos3DataConfig``.
"""

from __future__ import annotations

from typing import Literal

import attrs

from embodied_core.config.model_config import BaseModelConfig
from embodied_core.config.validators import non_negative, positive

__all__ = ["Cosmos3ModelConfig", "supported_only"]


def supported_only(value: object, why: str):
    """Validator of a LoongForge setting this port implements at one value only: any other value is an error
    naming the supported one and why (never silently replaced)."""

    def check(instance: object, attribute: attrs.Attribute, got: object) -> None:
        if got != value:
            raise ValueError(f"{got!r} is not supported; only {value!r} ({why})")

    return check


@attrs.define(kw_only=True)
class Cosmos3ModelConfig(BaseModelConfig):
    """Cosmos3 network sizes, VAE, flow-matching objective and sampling. Defaults are cosmos3_nano's."""

    # --- the mixture-of-transformers text stack (Qwen3-VL-8B text config) ---
    hidden_size: int = attrs.field(default=4096, validator=positive)
    """Hidden width of both pathways (Qwen3-VL-8B: 4096)."""
    intermediate_size: int = attrs.field(default=12288, validator=positive)
    """SwiGLU inner width of both pathways' MLPs."""
    num_hidden_layers: int = attrs.field(default=36, validator=positive)
    """Decoder layers; each holds an understanding (text) and a generation (vision/action) copy."""
    num_attention_heads: int = attrs.field(default=32, validator=positive)
    """Query heads."""
    num_key_value_heads: int = attrs.field(default=8, validator=positive)
    """Key/value heads (grouped-query attention)."""
    head_dim: int = attrs.field(default=128, validator=positive)
    """Per-head width; half of it is split over the three mRoPE axes (``rope_axes_dim``)."""
    vocab_size: int = attrs.field(default=151936, validator=positive)
    """Token embedding rows (Qwen3-VL tokenizer: 151936, which already holds ``<|vision_start|>``)."""
    rms_norm_eps: float = attrs.field(default=1e-6, validator=positive)
    """RMSNorm epsilon."""
    rope_theta: float = attrs.field(default=5_000_000.0, validator=positive)
    """RoPE base."""
    rope_axes_dim: list[int] = attrs.field(factory=lambda: [24, 20, 20])
    """mRoPE frequencies per axis (temporal, height, width); they sum to ``head_dim / 2``."""
    qk_norm_for_text: bool = True
    """RMSNorm of queries and keys in the understanding pathway (the generation pathway always has it)."""
    # --- vision / action generation ---
    latent_channel: int = attrs.field(default=48, validator=positive)
    """VAE latent channels (Wan2.2: 48)."""
    latent_patch_size: int = attrs.field(default=2, validator=positive)
    """Latent patch side: one token per ``p x p`` latent pixels of a frame."""
    max_action_dim: int = attrs.field(default=64, validator=positive)
    """Width of the action tokens; datasets' actions are zero-padded to it (``raw_action_dim`` keeps the real width)."""
    num_embodiment_domains: int = attrs.field(default=32, validator=positive)
    """Rows of the domain-aware action projections (one weight per embodiment; DROID is domain 8)."""
    base_fps: int = attrs.field(default=24, validator=positive)
    """Frame rate the temporal mRoPE positions are normalized to (fps modulation)."""
    enable_fps_modulation: bool = True
    """Temporal positions of video and action tokens advance with real time (``frame * base_fps / fps``)."""
    mrope_reset_spatial_ids: bool = True
    """Height/width positions of each video restart at 0 (instead of continuing from the text positions)."""
    mrope_temporal_modality_margin: int = attrs.field(default=15000, validator=non_negative)
    """Temporal position gap between the text and the generated modalities."""
    timestep_scale: float = attrs.field(default=0.001, validator=positive)
    """The flow timestep (0..1000) is multiplied by this before the sinusoidal time embedding."""
    # --- special tokens appended to every prompt (LoongForge's packing: caption, EOS, start of generation) ---
    eos_token_id: int = attrs.field(default=151645, validator=non_negative)
    """Token closing the caption (Qwen3-VL: ``<|im_end|>`` = 151645, the tokenizer's eos)."""
    start_of_generation_token_id: int = attrs.field(default=151652, validator=non_negative)
    """Token between the caption and the generated tokens (Qwen3-VL: ``<|vision_start|>`` = 151652; a tokenizer
    without it gets it appended, i.e. id ``len(tokenizer)``)."""
    # --- Wan2.2 VAE (diffusers AutoencoderKLWan; only the encoder is kept) ---
    vae_path: str | None = None
    """Local diffusers ``AutoencoderKLWan`` folder (``config.json`` + safetensors, e.g. Wan2.2-TI2V-5B-Diffusers'
    ``vae/``) whose encoder weights and latent statistics are used; unset: the VAE is built from the ``vae_*``
    fields (random weights, loaded by ``--pretrained-checkpoint`` of an embodied checkpoint)."""
    vae_base_dim: int = attrs.field(default=160, validator=positive)
    """Encoder base channels (Wan2.2: 160)."""
    vae_dim_mult: list[int] = attrs.field(factory=lambda: [1, 2, 4, 4])
    """Encoder channel multipliers per stage."""
    vae_num_res_blocks: int = attrs.field(default=2, validator=positive)
    """Residual blocks per encoder stage."""
    vae_temporal_downsample: list[bool] = attrs.field(factory=lambda: [False, True, True])
    """Which stages halve time (two of them: 4x temporal compression)."""
    vae_patch_size: int = attrs.field(default=2, validator=positive)
    """Pixel patchify before the encoder (Wan2.2: 2, so 16x spatial compression with three downsamples)."""
    vae_encode_content_only: bool = False
    """Encode only each video's content region (rounded up to whole latent pixels) instead of the whole padded
    bucket canvas. Same latent size, much less work when the content is small; the latents at the content's
    bottom/right edge differ slightly (the encoder no longer sees the padding). Off: LoongForge's behaviour."""
    vae_latents_mean: list[float] | None = None
    """Per-channel latent mean subtracted after encoding; unset: ``vae_path``'s config (required without it)."""
    vae_latents_std: list[float] | None = None
    """Per-channel latent std divided out after encoding; unset: ``vae_path``'s config (required without it)."""
    # --- objective ---
    shift: float = attrs.field(default=5.0, validator=positive)
    """Rectified-flow time shift: sigma = shift * s / (1 + (shift - 1) * s)."""
    train_time_distribution: Literal["waver", "uniform", "logitnormal"] = "waver"
    """Distribution of the raw flow time before the shift (LoongForge's ``waver``: mode-biased towards noise)."""
    action_loss_weight: float = attrs.field(default=10.0, validator=non_negative)
    """Weight of the action flow loss (masked to each sample's ``raw_action_dim``) added to the vision loss."""
    vision_loss_weight: float = attrs.field(default=1.0, validator=non_negative)
    """Weight of the vision flow loss (LoongForge's ``loss_scale``)."""
    action_normalization: Literal["none", "mean_std"] = "none"
    """``none``: actions in dataset units, as LoongForge (fine for DROID's radians); ``mean_std``: the observed-state
    row standardized with the ``observation.state`` statistics and the command rows with the ``action`` statistics
    (first ``raw_action_dim`` channels; sampled actions are mapped back), for datasets whose actions are far from
    unit scale."""
    keys_to_skip_loading: list[str] = attrs.field(factory=lambda: ["action2llm", "llm2action",
                                                                   "action_modality_embed"])
    """LoongForge module names whose weights a LoongForge DCP checkpoint does not load (the action heads start fresh
    on a vision-only checkpoint, as the reference's ``keys_to_skip_loading``); empty: load everything."""
    freeze_understanding: bool = False
    """Train only the generation pathway (LoongForge's ``train_modules``: every ``*_moe_gen`` weight, the latent and
    action projections, the time embedding): the token table and every layer's understanding (text) projections,
    norms and MLP get requires_grad=False. Off: everything the loss reaches trains."""
    # --- LoongForge settings: one supported value, or derived and checked ---
    latent_downsample_factor: int = attrs.field(default=16, validator=positive)
    """Pixels per latent pixel (LoongForge's field); must equal the VAE's spatial compression,
    ``vae_patch_size * 2 ** (len(vae_dim_mult) - 1)`` (Wan2.2: 16)."""
    qk_norm_for_diffusion: bool = attrs.field(default=True, validator=supported_only(
        True, "the generation pathway always normalizes its queries and keys"))
    """RMSNorm of queries and keys in the generation pathway; only true."""
    vision_gen: bool = attrs.field(default=True, validator=supported_only(
        True, "the action policy denoises the video latents with the actions"))
    """LoongForge's vision-generation switch; only true."""
    action_gen: bool = attrs.field(default=True, validator=supported_only(
        True, "this port is the action policy; vision-only Cosmos3 training is not implemented"))
    """LoongForge's action-generation switch; only true."""
    sound_gen: bool = attrs.field(default=False, validator=supported_only(
        False, "no sound heads; a diffusers checkpoint's sound weights are ignored"))
    """LoongForge's sound-generation switch; only false."""
    position_embedding_type: str = attrs.field(default="unified_3d_mrope", validator=supported_only(
        "unified_3d_mrope", "LoongForge implements no other either"))
    """Position encoding of the generated tokens; only unified_3d_mrope."""
    joint_attn_implementation: str = attrs.field(default="two_way", validator=supported_only(
        "two_way", "the understanding and generation pathways attend jointly in one attention; LoongForge's "
                   "three_way attention is not implemented"))
    """How the pathways attend to each other; only two_way."""
    train_time_weight_method: str = attrs.field(default="uniform", validator=supported_only(
        "uniform", "every time step's loss has weight 1; LoongForge's 'sigma' weighting is not implemented"))
    """Loss weight per flow time; only uniform."""
    # --- inference ---
    num_inference_steps: int = attrs.field(default=30, validator=positive)
    """Euler steps of ``sample_actions`` (vision and action denoised jointly, condition frame kept)."""
    # --- memory ---
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in backward (core's non-reentrant checkpointing)."""

    def validate(self) -> list[str]:
        """Rules spanning fields."""
        problems = []
        if self.num_attention_heads % self.num_key_value_heads:
            problems.append(f"model.num_attention_heads {self.num_attention_heads} is not a multiple of "
                            f"model.num_key_value_heads {self.num_key_value_heads}")
        if len(self.rope_axes_dim) != 3 or sum(self.rope_axes_dim) * 2 != self.head_dim:
            problems.append(f"model.rope_axes_dim {list(self.rope_axes_dim)} must be three numbers summing to "
                            f"model.head_dim / 2 = {self.head_dim / 2:g}")
        for name in ("eos_token_id", "start_of_generation_token_id"):
            if getattr(self, name) >= self.vocab_size:
                problems.append(f"model.{name} {getattr(self, name)} is not below model.vocab_size {self.vocab_size}")
        if self.vae_path is None:
            for name in ("vae_latents_mean", "vae_latents_std"):
                values = getattr(self, name)
                if values is None:
                    problems.append(f"model.{name} is unset and model.vae_path names no VAE folder to read it from: "
                                    "set model.vae_path to a local diffusers AutoencoderKLWan folder (or give the "
                                    f"{self.latent_channel} values)")
                elif len(values) != self.latent_channel:
                    problems.append(f"model.{name} has {len(values)} values; model.latent_channel is "
                                    f"{self.latent_channel}")
        if self.latent_downsample_factor != self.vae_spatial_compression:
            problems.append(f"model.latent_downsample_factor {self.latent_downsample_factor} is not the VAE's spatial "
                            f"compression {self.vae_spatial_compression} (model.vae_patch_size {self.vae_patch_size} "
                            f"* 2 ** (len(model.vae_dim_mult) - 1)); set it to {self.vae_spatial_compression}")
        if len(self.vae_temporal_downsample) != len(self.vae_dim_mult) - 1:
            problems.append(f"model.vae_temporal_downsample needs {len(self.vae_dim_mult) - 1} entries (one per "
                            f"downsampling stage of model.vae_dim_mult), got {len(self.vae_temporal_downsample)}")
        return problems

    @property
    def vae_temporal_compression(self) -> int:
        """Video frames per latent frame (after the first)."""
        return 2 ** sum(bool(x) for x in self.vae_temporal_downsample)

    @property
    def vae_spatial_compression(self) -> int:
        """Pixels per latent pixel along each side."""
        return self.vae_patch_size * 2 ** (len(self.vae_dim_mult) - 1)
