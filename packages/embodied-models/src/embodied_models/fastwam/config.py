"""Configuration of FastWAM: the ``model:`` section and the run checks (the ``data:`` section is
:class:`embodied_models.fastwam.data.config.FastWAMDataConfig`).

No torch here: ``embodied train --model-name fastwam --help`` builds its parser from these classes. Defaults are
the official model: the Wan2.2-TI2V-5B video DiT (30 blocks, 24 x 128 heads, FFN 14336, 48 latent channels) and
an action DiT of hidden width 1024 with the same 24 x 128 heads (LoongForge ``FastWAMModelConfig``; lerobot 0.6
``FastWAMConfig``).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from embodied_core.config.model_config import BaseModelConfig
from embodied_core.config.validators import non_negative, only, positive, probability

__all__ = ["PRETRAINED_LAYOUTS", "VARIANTS", "VIDEO_MASK_MODES", "FastWAMModelConfig", "check_run_config"]

VARIANTS = ("base", "uncond", "joint", "idm")
VIDEO_MASK_MODES = ("first_frame_causal", "bidirectional", "per_frame_causal")
PRETRAINED_LAYOUTS = ("auto", "embodied", "lerobot", "loongforge")
VAE_DTYPES = ("float32", "bfloat16")


@attrs.define(kw_only=True)
class FastWAMModelConfig(BaseModelConfig):
    """The two experts' shapes, the flow-matching recipe and where the frozen Wan VAE comes from."""

    variant: str = attrs.field(default="uncond", validator=attrs.validators.in_(VARIANTS))
    """MoT mask: base / uncond (actions see only the clean first frame; sampling prefills it once with a KV cache),
    joint (actions see every video token; sampling denoises video and actions together) or idm (inverse dynamics:
    actions see a teacher-forced copy of the clip, clean or noised; sampling denoises the video first, then the
    actions over its cached K/V). Video never sees actions."""
    video_attention_mask_mode: str = attrs.field(default="first_frame_causal",
                                                 validator=attrs.validators.in_(VIDEO_MASK_MODES))
    """Video -> video mask: first_frame_causal (frame 0 sees only itself, later frames see all video),
    bidirectional, or per_frame_causal (frame f sees frames <= f)."""
    patch_size: tuple[int, int, int] = (1, 2, 2)
    """(frame, height, width) patch of the video latents (Conv3d patch embedding)."""
    in_channels: int = attrs.field(default=48, validator=positive)
    """Latent channels (the Wan2.2 VAE z_dim)."""
    out_channels: int = attrs.field(default=48, validator=positive)
    """Channels of the predicted video velocity."""
    num_heads: int = attrs.field(default=24, validator=positive)
    """Attention heads of both experts (the joint attention needs the same heads)."""
    attn_head_dim: int = attrs.field(default=128, validator=positive)
    """Channels per head of both experts."""
    num_layers: int = attrs.field(default=30, validator=positive)
    """MoT layers (one video block and one action block each)."""
    video_hidden_dim: int = attrs.field(default=3072, validator=positive)
    """Width of the video expert (Wan2.2-TI2V-5B: 3072 = 24 x 128)."""
    video_ffn_dim: int = attrs.field(default=14336, validator=positive)
    """FFN width of the video expert."""
    video_freq_dim: int = attrs.field(default=256, validator=positive)
    """Sinusoid width of the video timestep embedding."""
    action_hidden_dim: int = attrs.field(default=1024, validator=positive)
    """Width of the action expert; its q/k/v project to num_heads x attn_head_dim."""
    action_ffn_dim: int = attrs.field(default=4096, validator=positive)
    """FFN width of the action expert."""
    action_freq_dim: int = attrs.field(default=256, validator=positive)
    """Sinusoid width of the action timestep embedding."""
    text_dim: int = attrs.field(default=4096, validator=positive)
    """Width of the text embeddings (UMT5-XXL: 4096); data.text_dim must agree."""
    eps: float = attrs.field(default=1e-6, validator=positive)
    """Epsilon of the layer and RMS norms."""
    rope_theta: float = attrs.field(default=10000.0, validator=positive)
    """RoPE base frequency."""
    video_train_shift: float = attrs.field(default=5.0, validator=positive)
    """Sigma shift of the video training timesteps and of the video loss weights."""
    video_infer_shift: float = attrs.field(default=5.0, validator=positive)
    """Sigma shift of the video sampling schedule (variant joint)."""
    action_train_shift: float = attrs.field(default=5.0, validator=positive)
    """Sigma shift of the action training timesteps and of the action loss weights."""
    action_infer_shift: float = attrs.field(default=5.0, validator=positive)
    """Sigma shift of the action sampling schedule."""
    num_train_timesteps: int = attrs.field(default=1000, validator=positive)
    """Timestep scale: the network sees num_train_timesteps * sigma."""
    idm_cond_noise_prob: float = attrs.field(default=0.5, validator=probability)
    """Variant idm: probability per sample that the teacher-forced video copy is noised (at its own timestep)."""
    lambda_video: float = attrs.field(default=1.0, validator=non_negative)
    """Weight of the video flow loss."""
    lambda_action: float = attrs.field(default=1.0, validator=non_negative)
    """Weight of the action flow loss."""
    num_inference_steps: int = attrs.field(default=10, validator=positive)
    """Euler steps of sample_actions."""
    inference_seed: int | None = None
    """Initial sampling noise: None (default) draws it from the policy's generator, per element and per call; an
    int reproduces lerobot's FastWAMPolicy (inference_seed, 42 there): a CPU generator seeded with it for every call,
    the same noise for every element."""
    rand_device: str = "cpu"
    """Device of the inference_seed generator (lerobot's rand_device: cpu; a cuda generator draws other numbers)."""
    use_proprio: bool = True
    """Append the proprio token (proprio_encoder(state)) to the text context; false: no proprio encoder and no state
    input (lerobot's proprio_dim=None)."""
    fp32_attention: bool = True
    """Run the joint self-attention and the cross-attentions on float32 q/k/v, outside autocast (lerobot's
    fp32_attention); false: in the compute dtype (--dtype), e.g. bf16 flash kernels."""
    action_conditioned: bool = attrs.field(default=False, validator=only(False, why="the action-conditioned video "
                                           "expert (action embedding in its text context) is not ported; "
                                           "FastWAMPolicy never uses it"))
    """lerobot's video_dit_config.action_conditioned; only false is supported."""
    vae_path: str | None = None
    """Local diffusers AutoencoderKLWan folder (the vae/ of Wan2.2-TI2V-5B-Diffusers) the model encodes the batch's
    video with (frozen, not part of the checkpoint); unneeded when batches carry 'latents'."""
    random_vae: bool = False
    """Use a randomly initialized tiny Wan VAE (embodied_models.wan.vae.TINY_VAE_CONFIG, fixed seed) instead of
    vae_path: for CPU tests only."""
    vae_dtype: str = attrs.field(default="float32", validator=attrs.validators.in_(VAE_DTYPES))
    """dtype the VAE runs in."""
    gradient_checkpointing: bool = False
    """Recompute each MoT layer in backward (core's activation checkpointing of the layers)."""
    video_pretrained_path: str | None = None
    """A diffusers WanTransformer3DModel folder (transformer/ of Wan2.2-TI2V-5B-Diffusers) loaded into the video
    expert when the model is built."""
    action_pretrained_path: str | None = None
    """An action-DiT backbone file from `embodied checkpoint init-fastwam-action-dit` loaded into the action
    expert when the model is built (its action_encoder and head stay as initialized)."""
    pretrained_layout: str = attrs.field(default="auto", validator=attrs.validators.in_(PRETRAINED_LAYOUTS))
    """Layout of --pretrained-checkpoint: auto (told by the keys), embodied, lerobot (lerobot's FastWAM:
    [model.]mot.layers.N.blocks.{video,action}.*) or loongforge (mixtures.video.blocks.N.*, aliases deduplicated)."""

    def validate(self) -> list[str]:
        """Rules that span fields."""
        problems = []
        if self.attn_head_dim % 2:
            problems.append(f"model.attn_head_dim={self.attn_head_dim} must be even (RoPE rotates channel pairs)")
        pairs = self.attn_head_dim // 2
        if pairs // 3 < 1:
            problems.append(f"model.attn_head_dim={self.attn_head_dim} is too small for the 3-D video RoPE (>= 6)")
        if self.video_hidden_dim != self.num_heads * self.attn_head_dim:
            problems.append(f"model.video_hidden_dim={self.video_hidden_dim} must equal num_heads x attn_head_dim = "
                            f"{self.num_heads * self.attn_head_dim} (the Wan video DiT's attention width)")
        if any(p < 1 for p in self.patch_size):
            problems.append(f"model.patch_size: every entry must be >= 1 (got {tuple(self.patch_size)})")
        if self.rand_device != "cpu" and not self.rand_device.startswith("cuda"):
            problems.append(f"model.rand_device={self.rand_device!r}: valid are cpu, cuda, cuda:N")
        if self.random_vae and self.vae_path:
            problems.append("model.random_vae and model.vae_path are exclusive: set one")
        return problems


def check_run_config(config: object) -> list[str]:
    """Rules between the ``model:`` and ``data:`` sections and the training flags of a FastWAM run (declared in the
    specs' ``checks``, reported before anything is built)."""
    model, data, training = config.model, config.data, config.training  # type: ignore[attr-defined]
    problems = []
    if data.text_dim != model.text_dim:
        problems.append(f"data.text_dim={data.text_dim} differs from model.text_dim={model.text_dim}: the text "
                        "cache's width must be the model's")
    frames = data.model_video_frames
    _, ph, pw = model.patch_size
    height, width = data.image_size
    num_cams = len(data.camera_keys) if data.camera_keys else None
    if (height // 16) % ph:
        problems.append(f"data.image_size height {height} gives {height // 16} latent rows, not divisible by "
                        f"model.patch_size[1]={ph}")
    if num_cams is not None and (width * num_cams // 16) % pw:
        problems.append(f"data.image_size width {width} x {num_cams} cameras gives {width * num_cams // 16} latent "
                        f"columns, not divisible by model.patch_size[2]={pw}")
    if model.patch_size[0] != 1 and ((frames - 1) // 4 + 1) % model.patch_size[0]:
        problems.append(f"model.patch_size[0]={model.patch_size[0]} does not divide the latent frames")
    if not model.vae_path and not model.random_vae and training.dataset_format == "lerobot_datasets":
        problems.append(f"{training.model_name} encodes the video with the Wan VAE: set model.vae_path=<folder with "
                        "the diffusers AutoencoderKLWan config.json and weights> (the vae/ of "
                        "Wan2.2-TI2V-5B-Diffusers)")
    if training.dataset_format == "lerobot_datasets" and training.dataset_strategy != "fastwam":
        problems.append(f"{training.model_name} reads video windows and text embeddings: add --dataset-strategy "
                        "fastwam (and build the text cache with `embodied data precompute-text`)")
    checkpoint = getattr(training, "pretrained_checkpoint", None)
    if checkpoint and Path(checkpoint).exists():  # a lerobot config.json beside it must describe this network
        from embodied_models.fastwam.reference import checkpoint_config_problems

        problems += checkpoint_config_problems(model, checkpoint)
    if training.init_on_meta and (model.video_pretrained_path or model.action_pretrained_path):
        problems.append("model.video_pretrained_path / model.action_pretrained_path are loaded while the model is "
                        "built, which --init-on-meta builds on the meta device: drop --init-on-meta, or load an "
                        "assembled FastWAM checkpoint with --pretrained-checkpoint")
    return problems
