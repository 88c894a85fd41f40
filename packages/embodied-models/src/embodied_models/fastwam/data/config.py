"""``FastWAMDataConfig``: the ``data:`` section of the FastWAM models (what the ``fastwam`` strategy reads).

No torch here: ``embodied train --model-name fastwam --help`` builds its parser from this class.

Two conventions for the video window are supported (``frame_window_mode``):

- ``loongforge`` (default, LoongForge's): ``num_video_frames`` T is the number of frames the model sees, taken
  every ``action_video_freq_ratio`` r dataset frames: offsets ``0, r, ..., (T - 1) r``.
- ``lerobot`` (lerobot's FastWAM): ``num_video_frames`` is the raw window of consecutive dataset frames; the model
  sees every r-th of them: offsets ``0, r, ..., num_video_frames - 1`` (``(num_video_frames - 1) / r + 1`` frames).

In both the model's frame count F must satisfy ``F % 4 == 1`` (the Wan VAE folds 4 frames into one latent frame
after the first) and ``action_horizon`` must be a multiple of ``F - 1``.

Switches named ``*_mode`` / ``missing_text_cache`` / ``stats_source`` whose non-default value is marked "LoongForge"
reproduce a LoongForge behaviour that the strategy README (``../shared/datasets/strategies/README.md``) lists as a
bug or that our stats contract forbids; they exist for bitwise parity with the golden files.
"""

from __future__ import annotations

import re

import attrs

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.validators import positive
from embodied_models.fastwam.data.prompts import PROMPT_TEMPLATE, template_problems

__all__ = ["CONTEXT_MASK_MODES", "FRAME_WINDOW_MODES", "IMAGE_PAD_MODES", "MISSING_TEXT_CACHE", "NORMALIZATION_MODES",
           "STATS_SOURCES", "FastWAMDataConfig", "check_strategy_model"]

FRAME_WINDOW_MODES = ("loongforge", "lerobot")
NORMALIZATION_MODES = ("q01_q99", "mean_std")
STATS_SOURCES = ("dataset", "loongforge")
IMAGE_PAD_MODES = ("real", "always_false")
CONTEXT_MASK_MODES = ("tokens", "all_true")
MISSING_TEXT_CACHE = ("error", "zeros")

VAE_TEMPORAL_DOWNSAMPLE = 4
"""The Wan VAE folds 4 video frames into one latent frame (the first latent frame holds one frame)."""
VAE_SPATIAL_DOWNSAMPLE = 16
"""The Wan2.2 VAE (with its 2x2 patchify) divides height and width by 16."""


@attrs.define(kw_only=True)
class FastWAMDataConfig(BaseDataConfig):
    """What FastWAM reads from a LeRobot dataset (``--dataset-strategy fastwam``).

    A sample is one dataset frame: a video window from it (cameras resized to ``image_size``, joined along the
    width, scaled to [-1, 1]), the action chunk of ``action_horizon`` steps with ``action_is_pad``, the current
    state (expanded over the horizon by the collator), and the UMT5 embedding of the task prompt read from
    ``text_cache_dir``.
    """

    camera_keys: list[str] | None = None
    """Cameras to read; unset: every camera of the dataset. They are joined left to right sorted by key (as
    LeRobot's FastWAM and LoongForge do) unless ``sort_cameras`` is off."""
    sort_cameras: bool = True
    """Join the cameras in sorted key order (LoongForge); off: in ``camera_keys`` order."""
    image_size: tuple[int, int] = (224, 224)
    """(height, width) each camera is resized to (bilinear, antialiased); the video is [3, F, H, W * cameras]."""
    action_horizon: int = attrs.field(default=32, validator=positive)
    """Action steps per sample (the chunk starts at the current frame); a multiple of the model's frames - 1."""
    num_video_frames: int = attrs.field(default=9, validator=positive)
    """Video frames per sample: frames the model sees (frame_window_mode=loongforge, default) or the raw window of
    consecutive dataset frames (frame_window_mode=lerobot)."""
    action_video_freq_ratio: int = attrs.field(default=4, validator=positive)
    """Dataset frames (action steps) between two video frames the model sees."""
    frame_window_mode: str = attrs.field(default="loongforge", validator=attrs.validators.in_(FRAME_WINDOW_MODES))
    """How num_video_frames is counted: loongforge (default: frames the model sees, offsets 0, r, .., (T-1) r) or
    lerobot (lerobot's FastWAM: the raw window, offsets 0, r, .., T-1)."""
    max_action_dim: int | None = attrs.field(default=None, validator=attrs.validators.optional(positive))
    """Zero-pad normalized actions to this width (None: the dataset's action width)."""
    normalization_mode: str = attrs.field(default="q01_q99", validator=attrs.validators.in_(NORMALIZATION_MODES))
    """State/action normalization: q01_q99 (default, LoongForge: 2 (x - q01) / (q99 - q01) - 1, no clamp) or
    mean_std (lerobot's FastWAM: (x - mean) / std)."""
    stats_source: str = attrs.field(default="dataset", validator=attrs.validators.in_(STATS_SOURCES))
    """Where q01/q99 come from: dataset (default: real quantiles of the data) or loongforge (meta/stats.json as
    stored, else min/max used as q01/q99: LoongForge's sources, for parity only)."""
    image_pad_mode: str = attrs.field(default="real", validator=attrs.validators.in_(IMAGE_PAD_MODES))
    """image_is_pad: real (default: True for frames past the episode end, clamped to its last frame) or
    always_false (LoongForge)."""
    text_cache_dir: str | None = None
    """Folder of precomputed UMT5 prompt embeddings ({sha256(prompt)}.t5_len{text_len}.{encoder_id}.pt, made by
    `embodied data precompute-text`; absolute or relative to the working directory); required unless
    missing_text_cache=zeros. Every task of the dataset must have an entry (checked before training)."""
    text_len: int = attrs.field(default=128, validator=positive)
    """Text tokens per prompt (the cache's t5_len; LoongForge's model.tokenizer_max_len)."""
    text_dim: int = attrs.field(default=4096, validator=positive)
    """Width of the text embeddings (UMT5-XXL: 4096); must match the model's text_dim."""
    encoder_id: str = "wan22ti2v5b"
    """Encoder id in the cache file names (lowercase alphanumerics of the model id's last part)."""
    context_mask_mode: str = attrs.field(default="tokens", validator=attrs.validators.in_(CONTEXT_MASK_MODES))
    """context_mask: tokens (default: the prompt's real tokens) or all_true (LoongForge: padding positions are
    zeroed and still marked valid)."""
    prompt_template: str = PROMPT_TEMPLATE
    """Prompt of a task (its one field is {task}; lerobot's prompt_template); a task that already starts with "A
    video recorded" is kept as it is (LoongForge). `embodied data precompute-text --prompt-template` must use the
    same."""
    toggle_action_dimensions: list[int] = attrs.field(factory=list)
    """Action dimensions (negative: from the end) mapped to sign(-(2 a - 1)) after unnormalizing the sampled
    actions (lerobot's toggle_action_dimensions: the LIBERO gripper); empty: none."""
    missing_text_cache: str = attrs.field(default="error", validator=attrs.validators.in_(MISSING_TEXT_CACHE))
    """With text_cache_dir unset: error (default) or zeros (LoongForge: an all-zero context with an all-True
    mask, silently)."""

    @property
    def model_video_frames(self) -> int:
        """Frames the model sees per sample (F)."""
        if self.frame_window_mode == "lerobot":
            return (self.num_video_frames - 1) // self.action_video_freq_ratio + 1
        return self.num_video_frames

    @property
    def video_frame_offsets(self) -> list[int]:
        """Offsets (dataset frames from the current one) of the F video frames."""
        return [i * self.action_video_freq_ratio for i in range(self.model_video_frames)]

    def geometry_problems(self) -> list[str]:
        """The frame-window rules (also checked by the strategy before any data is read)."""
        problems = []
        t, r = self.num_video_frames, self.action_video_freq_ratio
        if (t - 1) % r:
            what = "the raw window" if self.frame_window_mode == "lerobot" else "LoongForge's rule"
            problems.append(f"data.num_video_frames={t}: (num_video_frames - 1) must be a multiple of "
                            f"data.action_video_freq_ratio={r} ({what}, frame_window_mode={self.frame_window_mode})")
            return problems
        frames = self.model_video_frames
        if frames % VAE_TEMPORAL_DOWNSAMPLE != 1:
            valid = ", ".join(str(4 * k + 1) for k in range(1, 5))
            problems.append(f"data.num_video_frames={t} gives {frames} model frames (frame_window_mode="
                            f"{self.frame_window_mode}); the Wan VAE needs frames % 4 == 1 ({valid}, ...)")
        elif frames == 1:  # lerobot: "Video T must be > 1"
            problems.append(f"data.num_video_frames={t} gives 1 model frame (frame_window_mode="
                            f"{self.frame_window_mode}); FastWAM predicts the frames after the first: at least 5")
        elif self.action_horizon % (frames - 1):
            problems.append(f"data.action_horizon={self.action_horizon} must be a multiple of the model's video "
                            f"frames - 1 = {frames - 1} (data.num_video_frames={t}, frame_window_mode="
                            f"{self.frame_window_mode})")
        return problems

    def validate(self) -> list[str]:
        """Rules that span fields."""
        problems = super().validate() + self.geometry_problems()
        if any(side % VAE_SPATIAL_DOWNSAMPLE for side in self.image_size):
            problems.append(f"data.image_size: both sides must be multiples of {VAE_SPATIAL_DOWNSAMPLE} (the Wan VAE "
                            f"downsampling), got {tuple(self.image_size)}")
        if self.max_action_dim is not None and self.action_dim is not None and self.max_action_dim < self.action_dim:
            problems.append(f"data.max_action_dim={self.max_action_dim} is smaller than data.action_dim="
                            f"{self.action_dim}; set it >= {self.action_dim} or unset it")
        problems += template_problems(self.prompt_template, "data.prompt_template")
        width = self.action_dim
        bad = [d for d in self.toggle_action_dimensions if width is not None and not -width <= d < width]
        if bad:
            problems.append(f"data.toggle_action_dimensions: {bad} out of range for data.action_dim={width} (valid: "
                            f"{-width}..{width - 1})")
        if not re.fullmatch(r"[a-z0-9]+", self.encoder_id):
            problems.append(f"data.encoder_id={self.encoder_id!r}: must be non-empty lowercase letters and digits "
                            "(it is part of the cache file names)")
        return problems


def check_strategy_model(config: object) -> list[str]:
    """The check of ``--dataset-strategy fastwam`` (declared by its spec): its samples need a FastWAM data section."""
    if isinstance(config.data, FastWAMDataConfig):  # type: ignore[attr-defined]
        return []
    return [f"--dataset-strategy fastwam needs a model whose data section is FastWAMDataConfig (the selected model's "
            f"is {type(config.data).__name__}); use it with --model-name fastwam or fastwam_tiny"]  # type: ignore[attr-defined]
