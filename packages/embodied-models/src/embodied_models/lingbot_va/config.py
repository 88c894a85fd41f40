"""Configuration of LingBot-VA: the ``model:`` and ``data:`` sections and the three presets.

No torch here: ``embodied train --model-name lingbot_va_tiny --help`` builds its parser from these classes.
Sizes follow the released LingBot-VA transformer (``robbyant/lingbot-va-base`` ``transformer/config.json``,
the Wan2.2 TI2V-5B block shape) and the upstream training configs (``wan_va/configs/va_libero_cfg.py``,
``va_robotwin_cfg.py`` in Robbyant/lingbot-va).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from embodied_core.config.model_config import BaseDataConfig, BaseModelConfig
from embodied_core.config.validators import positive, probability

__all__ = ["ATTENTION_BACKENDS", "CAMERA_LAYOUTS", "LingBotVADataConfig", "LingBotVAModelConfig"]

CAMERA_LAYOUTS = ("width_concat", "robotwin_tshape")
ATTENTION_BACKENDS = ("auto", "sdpa", "flex")
PRETRAINED_LAYOUTS = ("lingbot_va", "lerobot", "wan22")

# The Wan2.2 VAE turns 4 video frames into one latent frame (the first latent frame holds one frame).
VAE_TEMPORAL_DOWNSAMPLE = 4
# The Wan2.2 VAE (with its 2x2 output patchify) divides height and width by 16.
VAE_SPATIAL_DOWNSAMPLE = 16




@attrs.define(kw_only=True)
class LingBotVAModelConfig(BaseModelConfig):
    """The transformer shape and the flow-matching training recipe (defaults: the official 5B model)."""

    patch_size: tuple[int, int, int] = (1, 2, 2)
    """(frame, height, width) patch of the video latents; one token per patch."""
    num_attention_heads: int = attrs.field(default=24, validator=positive)
    """Attention heads per block."""
    attention_head_dim: int = attrs.field(default=128, validator=positive)
    """Channels per head; ``head_dim // 3`` must be even (3-D RoPE split)."""
    in_channels: int = attrs.field(default=48, validator=positive)
    """Channels of the video latents (the Wan2.2 VAE ``z_dim``)."""
    out_channels: int = attrs.field(default=48, validator=positive)
    """Channels of the predicted video velocity."""
    action_dim: int = attrs.field(default=30, validator=positive)
    """Width of the model's action space (embodiment channels are scattered into it)."""
    used_action_channel_ids: list[int] = attrs.field(factory=lambda: [0, 1, 2, 3, 4, 5, 28])
    """Model action channels the embodiment uses, in dataset action order; the rest are masked out."""
    text_dim: int = attrs.field(default=4096, validator=positive)
    """Width of the text-encoder output (UMT5-XXL: 4096)."""
    text_len: int = attrs.field(default=512, validator=positive)
    """Text positions the transformer sees (UMT5 max length; shorter prompts are zero padded)."""
    freq_dim: int = attrs.field(default=256, validator=positive)
    """Sinusoidal timestep-embedding width."""
    ffn_dim: int = attrs.field(default=14336, validator=positive)
    """Hidden width of each block's feed-forward network."""
    num_layers: int = attrs.field(default=30, validator=positive)
    """Number of transformer blocks."""
    cross_attn_norm: bool = True
    """LayerNorm (with affine) before the text cross-attention."""
    eps: float = attrs.field(default=1e-6, validator=positive)
    """Epsilon of the layer and RMS norms."""
    rope_theta: float = attrs.field(default=10000.0, validator=positive)
    """RoPE base frequency."""
    snr_shift: float = attrs.field(default=5.0, validator=positive)
    """Shift of the video flow-matching sigmas: sigma' = s*sigma / (1 + (s-1)*sigma)."""
    action_snr_shift: float = attrs.field(default=1.0, validator=positive)
    """Shift of the action flow-matching sigmas."""
    num_train_timesteps: int = attrs.field(default=1000, validator=positive)
    """Size of the discrete training schedule."""
    noisy_cond_prob: float = attrs.field(default=0.5, validator=probability)
    """Probability that the clean (conditioning) video copy is itself noised at t in [0.5, 1)."""
    text_dropout_prob: float = attrs.field(default=0.1, validator=probability)
    """Probability per sample of replacing the prompt with the empty prompt (classifier-free guidance)."""
    chunk_size_range: tuple[int, int] = (1, 4)
    """Inclusive range of the frame chunk size of the block-causal mask, drawn per step."""
    window_size_range: tuple[int, int] = (4, 64)
    """Inclusive range of the attention window (frame-id units), drawn per step."""
    attention_backend: str = attrs.field(default="auto", validator=attrs.validators.in_(ATTENTION_BACKENDS))
    """'sdpa' (dense boolean mask), 'flex' (block-sparse flex attention, CUDA) or 'auto' (flex on CUDA)."""
    gradient_checkpointing: bool = False
    """Recompute each block in backward to save activation memory (core's non-reentrant activation
    checkpointing, the mechanism of --activation-checkpoint-module-patterns transformer.blocks.*)."""
    num_inference_steps: int = attrs.field(default=20, validator=positive)
    """Video denoising steps of ``sample_actions``."""
    action_num_inference_steps: int = attrs.field(default=50, validator=positive)
    """Action denoising steps of ``sample_actions``."""
    guidance_scale: float = attrs.field(default=5.0, validator=positive)
    """Classifier-free guidance of the video stream in ``sample_actions`` (> 1 needs ``null_text_emb``)."""
    action_guidance_scale: float = attrs.field(default=1.0, validator=positive)
    """Classifier-free guidance of the action stream in ``sample_actions`` (1: none)."""
    attn_window: int = attrs.field(default=30, validator=positive)
    """Inference KV cache of the streaming policy: attn_window // 2 chunks are kept (lerobot's attn_window)."""
    video_exec_step: int = -1
    """Video denoising steps run before the actions are denoised (lerobot's video_exec_step): -1 runs all of them
    and shows the actions the finished video at t = 0; k in 1..num_inference_steps stops after k steps and shows
    them the video as the k-th step saw it (at its timestep)."""
    pretrained_path: str | None = None
    """``transformer/`` folder (or a folder holding one) loaded with a strict report when the model is built."""
    pretrained_layout: str = attrs.field(default="lingbot_va", validator=attrs.validators.in_(PRETRAINED_LAYOUTS))
    """Layout of ``pretrained_path`` (and of a transformer folder given as --pretrained-checkpoint, which
    --init-on-meta streams into the shards): 'lingbot_va' (a LingBot-VA release or our export), 'lerobot' (a lerobot
    policy folder's transformer), or 'wan22' (a raw Wan2.2-TI2V-5B transformer, converted on load)."""
    resume_optimizer: str = attrs.field(default="restore", validator=attrs.validators.in_(("restore", "rebuild")))
    """On resume (trainer ``lingbot_va``): 'restore' the optimizer state, or 'rebuild' it from zero (fresh AdamW
    moments; weights, step and LR schedule still continue without re-warmup)."""
    export_transformer: bool = False
    """Also write a diffusers ``transformer/`` folder into every checkpoint (trainer ``lingbot_va``)."""

    @property
    def inner_dim(self) -> int:
        """Model width (heads x head_dim)."""
        return self.num_attention_heads * self.attention_head_dim

    def validate(self) -> list[str]:
        """Rules that span fields."""
        problems = []
        third = self.attention_head_dim // 3
        if third % 2 or (self.attention_head_dim - 2 * third) % 2:
            problems.append(f"model.attention_head_dim: {self.attention_head_dim} splits into RoPE parts "
                            f"({self.attention_head_dim - 2 * third}, {third}, {third}); each must be even "
                            "(e.g. 12, 14, 24, 128)")
        if any(p < 1 for p in self.patch_size):
            problems.append(f"model.patch_size: every entry must be >= 1 (got {self.patch_size})")
        bad = [i for i in self.used_action_channel_ids if not 0 <= i < self.action_dim]
        if bad or not self.used_action_channel_ids:
            problems.append(f"model.used_action_channel_ids: must be a non-empty list of channels in "
                            f"[0, {self.action_dim}) (bad: {bad})")
        if len(set(self.used_action_channel_ids)) != len(self.used_action_channel_ids):
            problems.append("model.used_action_channel_ids: channels must be distinct")
        if self.attn_window < 2:
            problems.append(f"model.attn_window={self.attn_window}: the cache keeps attn_window // 2 chunks, so it "
                            "must be >= 2")
        if self.video_exec_step != -1 and not 1 <= self.video_exec_step <= self.num_inference_steps:
            problems.append(f"model.video_exec_step={self.video_exec_step}: valid are -1 (all steps) or 1.."
                            f"{self.num_inference_steps} (model.num_inference_steps)")
        for name, low in (("chunk_size_range", 1), ("window_size_range", 1)):
            lo, hi = getattr(self, name)
            if lo < low or hi < lo:
                problems.append(f"model.{name}: need {low} <= min <= max (got {(lo, hi)})")
        return problems


@attrs.define(kw_only=True)
class LingBotVADataConfig(BaseDataConfig):
    """What LingBot-VA reads: cached VAE latents and text embeddings plus the LeRobot actions.

    A sample is a window of ``num_latent_frames`` latent frames of one episode. Video frames are taken every
    ``video_stride`` dataset frames; one latent frame covers 4 of them, so ``action_per_frame`` actions per
    latent frame are taken every ``4 * video_stride / action_per_frame`` dataset frames.
    """

    camera_keys: list[str] | None = None
    """Cameras, in layout order (width_concat: left to right; robotwin_tshape: head, left wrist, right wrist);
    unset: the dataset's cameras in their declared order (the presets set them: the latent cache records them)."""
    image_size: tuple[int, int] = (128, 128)
    """(height, width) each camera is resized to before VAE encoding (T-shape: the head camera's size)."""
    camera_layout: str = attrs.field(default="width_concat", validator=attrs.validators.in_(CAMERA_LAYOUTS))
    """How per-camera latents are tiled into one latent image."""
    image_hflip: bool = False
    """Inference only: mirror every camera frame left-right before it is encoded (lerobot's image_hflip, which undoes
    its LIBERO env processor's flip); the training latents are never flipped (nor are lerobot's)."""
    action_dim: int | None = None
    """Dimension of the dataset's action vector (scattered into ``model.used_action_channel_ids``); unset: the
    dataset's."""
    state_dim: int | None = None
    """Dimension of the dataset's state vector (not an input of the model); unset: the dataset's."""
    action_horizon: int = 16
    """Actions per sample = num_latent_frames * action_per_frame (checked)."""
    num_latent_frames: int = attrs.field(default=4, validator=positive)
    """Latent frames per training sample (the first one is the conditioning frame)."""
    action_per_frame: int = attrs.field(default=4, validator=positive)
    """Actions per latent frame (LIBERO 4, RoboTwin 16)."""
    video_stride: int = attrs.field(default=1, validator=positive)
    """Dataset frames between two video frames fed to the VAE."""
    latent_cache: str = "latents"
    """Cache folder of VAE latents and text embeddings (relative to the dataset root, or absolute)."""
    normalize_actions: bool = True
    """Map actions to [-1, 1] with the dataset's q01/q99 quantiles (as upstream)."""

    @property
    def action_stride(self) -> int:
        """Dataset frames between two actions."""
        return VAE_TEMPORAL_DOWNSAMPLE * self.video_stride // self.action_per_frame

    @property
    def num_video_frames(self) -> int:
        """Video frames encoded into ``num_latent_frames`` latent frames."""
        return VAE_TEMPORAL_DOWNSAMPLE * (self.num_latent_frames - 1) + 1

    def latent_hw(self) -> tuple[int, int]:
        """(height, width) of the tiled latent image."""
        h, w = (side // VAE_SPATIAL_DOWNSAMPLE for side in self.image_size)
        if self.camera_layout == "robotwin_tshape":
            return h + h // 2, w
        return h, w * len(self.camera_keys)

    def validate(self) -> list[str]:
        """Rules that span fields."""
        problems = super().validate()
        if (VAE_TEMPORAL_DOWNSAMPLE * self.video_stride) % self.action_per_frame:
            problems.append(f"data.action_per_frame: 4 * video_stride ({4 * self.video_stride}) must be a "
                            f"multiple of action_per_frame ({self.action_per_frame})")
        if self.action_horizon != self.num_latent_frames * self.action_per_frame:
            problems.append(f"data.action_horizon: must equal num_latent_frames * action_per_frame = "
                            f"{self.num_latent_frames * self.action_per_frame} (got {self.action_horizon})")
        if any(side % VAE_SPATIAL_DOWNSAMPLE for side in self.image_size):
            problems.append(f"data.image_size: both sides must be multiples of 16 (got {self.image_size})")
        if self.camera_layout == "robotwin_tshape":
            if self.camera_keys is not None and len(self.camera_keys) != 3:
                problems.append("data.camera_keys: robotwin_tshape needs 3 cameras (head, left wrist, right "
                                f"wrist), got {len(self.camera_keys)}")
            if any(side % 32 for side in self.image_size):
                problems.append("data.image_size: robotwin_tshape halves the wrist cameras, so both sides must "
                                f"be multiples of 32 (got {self.image_size})")
        return problems


def check_strategy_model(config: object) -> list[str]:
    """The check of ``--dataset-strategy lingbot_va`` (declared by its spec): only LingBot-VA models read its
    latent caches."""
    if isinstance(config.model, LingBotVAModelConfig):  # type: ignore[attr-defined]
        return []
    return ["--dataset-strategy lingbot_va reads LingBot-VA latent caches; use it with --model-name "
            "lingbot_va_libero, lingbot_va_robotwin or lingbot_va_tiny"]


def check_run_config(config: object) -> list[str]:
    """Rules between the ``model:`` and ``data:`` sections and the training flags of a LingBot-VA run.

    Declared in the model specs' ``checks`` (:mod:`.spec`), so they are reported with every other config
    problem of a run that selects a LingBot-VA model, before anything is built.
    """
    model, data, training = config.model, config.data, config.training  # type: ignore[attr-defined]
    problems = []
    if data.action_dim is not None and len(model.used_action_channel_ids) != data.action_dim:
        problems.append(f"model.used_action_channel_ids has {len(model.used_action_channel_ids)} channels but "
                        f"data.action_dim={data.action_dim}: give one model channel per dataset action channel")
    h, w = data.latent_hw() if data.camera_keys is not None else (0, 0)
    _, ph, pw = model.patch_size
    if h % ph or w % pw:
        problems.append(f"data.image_size {tuple(data.image_size)} gives a {h}x{w} latent image, not divisible by "
                        f"model.patch_size {tuple(model.patch_size)[1:]}")
    if training.dataset_format == "lerobot_datasets" and training.dataset_strategy != "lingbot_va":
        problems.append(f"{training.model_name} trains on cached latents: add --dataset-strategy lingbot_va (and "
                        "build the cache with `embodied data precompute-latents`)")
    if training.trainer_type == "FinetuneTrainer":
        problems.append(f"{training.model_name} draws its noise from its own generator: use --trainer-type lingbot_va "
                        "so the generator is seeded per rank and checkpointed")
    for source in (getattr(training, "pretrained_checkpoint", None), model.pretrained_path):
        if source and Path(source).exists():  # a lerobot config.json beside it must describe this network
            from embodied_models.lingbot_va.reference import checkpoint_config_problems

            problems += checkpoint_config_problems(model, source)
    if training.init_on_meta and model.pretrained_path:
        problems.append(f"model.pretrained_path is loaded while the model is built, which --init-on-meta builds on the "
                        f"meta device: pass it as --pretrained-checkpoint {model.pretrained_path} (with "
                        f"model.pretrained_layout={model.pretrained_layout}) instead")
    return problems
