"""The ``data:`` section of Cosmos3 runs (``Cosmos3DataConfig``), read by the ``cosmos3_droid`` strategy.

No torch here: ``embodied train --model-name cosmos3_* --help`` builds its parser from this class. The defaults are
LoongForge's DROID reader and transform (``action_chunk_length`` 32, the ``"480"`` tier, DROID's column names);
its nano recipe YAML sets ``max_text_tokens`` 99999 and ``cfg_dropout_rate`` 0.1 on top.
"""

from __future__ import annotations

import os

import attrs

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.validators import positive, probability
from embodied_models.cosmos3.data.tables import DOMAIN_IDS, RESOLUTION_BUCKETS

__all__ = ["CAPTION_CHOICES", "DROID_CAMERAS", "Cosmos3DataConfig"]

DROID_CAMERAS = ("observation.image.wrist_image_left", "observation.image.exterior_image_1_left",
                 "observation.image.exterior_image_2_left")
"""DROID v3.0 camera keys in layout order: wrist (top), exterior 1 (bottom left), exterior 2 (bottom right)."""

CAPTION_CHOICES = ("sample_seed", "position")


def _three_cameras(instance: object, attribute: attrs.Attribute, value: list[str] | None) -> None:
    if value is not None and len(value) != 3:
        raise ValueError(f"needs exactly 3 cameras in layout order (wrist on top, then the two exterior views below), "
                         f"got {len(value)}: {list(value)}")


def _dead(replacement: str):
    """Validator of a LoongForge setting that has no effect there: any value is an error naming what to use."""

    def check(instance: object, attribute: attrs.Attribute, value: object) -> None:
        if value is not None:
            raise ValueError(f"is not a setting of the cosmos3_droid strategy (LoongForge accepts data."
                             f"{attribute.name} but never reads it); {replacement}")

    return check


@attrs.define(kw_only=True)
class Cosmos3DataConfig(BaseDataConfig):
    """What the ``cosmos3_droid`` strategy reads and how it builds each Cosmos3 policy sample.

    A sample is a window of ``action_chunk_length + 1`` consecutive frames of one episode (only windows that fit
    in the episode): the three cameras laid out as one video (wrist on top, the exterior views at half size
    below), the observed state of the first frame followed by the commanded actions of the next ones, and a
    caption built from the task.
    """

    camera_keys: list[str] | None = attrs.field(factory=lambda: list(DROID_CAMERAS), validator=_three_cameras)
    """The three cameras in layout order: the wrist camera (top row, full size), then the two exterior cameras
    (bottom row, left and right, at half size)."""
    joint_action_key: str = "action.joint_position"
    """Dataset key of the commanded joint positions (action rows 1..)."""
    gripper_action_key: str = "action.gripper_position"
    """Dataset key of the commanded gripper position (stored as 1 - g in the action)."""
    joint_state_key: str = "observation.state.joint_positions"
    """Dataset key of the observed joint positions (action row 0)."""
    gripper_state_key: str = "observation.state.gripper_position"
    """Dataset key of the observed gripper position (action row 0, stored as 1 - g)."""
    action_chunk_length: int = attrs.field(default=32, validator=positive)
    """Supervised action steps per sample; each sample spans ``action_chunk_length + 1`` frames. Must be a multiple
    of the VAE's temporal compression (4), so video frames and action rows line up."""
    action_fps: float | None = attrs.field(default=None, validator=positive)
    """Frame rate named in the caption and the fps conditioning; unset: the dataset's fps. No resampling happens,
    so a value other than the dataset's fps is an error (LoongForge would describe the clip wrongly)."""
    max_text_tokens: int = attrs.field(default=2048, validator=positive)
    """Caption tokens kept (the chat-templated ids are cut after this many)."""
    cfg_dropout_rate: float = attrs.field(default=0.0, validator=probability)
    """Probability per sample of an empty caption (classifier-free guidance), drawn from the sample's seeded
    RNG."""
    resolution_tier: str = attrs.field(default="480", validator=attrs.validators.in_(tuple(RESOLUTION_BUCKETS)))
    """Resolution tier whose aspect buckets the video is fitted to (aspect-preserving down-scaling, then padding
    bottom/right): 256, 480, 704, 720, 768, 1080, 1280, 2048 or gt_2048. LoongForge always uses 480."""
    embodiment: str = attrs.field(default="droid_lerobot", validator=attrs.validators.in_(tuple(DOMAIN_IDS)))
    """Embodiment name; selects the domain id of the domain-aware action projections (droid_lerobot: 8)."""
    caption_choice: str = attrs.field(default="sample_seed", validator=attrs.validators.in_(CAPTION_CHOICES))
    """How one of a task's ``" | "``-separated alternatives is picked: 'sample_seed' (from the sample's seeded RNG,
    so it varies by epoch and is reproducible), or 'position' (``random.Random(position)``: the same alternative
    every epoch, as LoongForge's --deterministic-mode)."""
    use_image_augmentation: bool = False
    """Training samples: LoongForge's augmentation of the three views before the layout (RandomCrop of 95 % of each
    side, Resize back, ColorJitter(0.3, 0.4, 0.5, 0.08), one draw for every view and frame, torchvision v1 kernels:
    the ``cosmos3`` preset of embodied-data, run here on the floats the layout resizes). Needs
    embodied-data[augment]. Policies and evaluation never augment."""
    image_augmentation_seed: str = attrs.field(default="sample_seed", validator=attrs.validators.in_(CAPTION_CHOICES))
    """What the augmentation draws from: 'sample_seed' (torch's RNG as the loader seeds it per sample), or 'position'
    (``torch.manual_seed(position)``: the same draw every epoch, as LoongForge's --deterministic-mode)."""
    exact_duration: bool = False
    """Caption duration as frames / fps with one decimal ("0.6 seconds" for 9 frames at 15 fps) instead of Cosmos'
    truncated int(frames / fps) ("0.0 seconds"), which the pretrained model was trained with."""
    tokenizer_path: str | None = None
    """Qwen3-VL tokenizer folder (tokenizer.json with a chat template); unset: --tokenizer-path."""
    target_h: int | None = attrs.field(default=None, validator=_dead("choose the bucket tier with "
                                                                        "data.resolution_tier"))
    """Rejected: LoongForge's dead target height (use data.resolution_tier)."""
    target_w: int | None = attrs.field(default=None, validator=_dead("choose the bucket tier with "
                                                                        "data.resolution_tier"))
    """Rejected: LoongForge's dead target width (use data.resolution_tier)."""
    video_backend: str | None = attrs.field(default=None, validator=_dead("choose the decoder with --video-backend"))
    """Rejected: the decoder is chosen with --video-backend."""

    def resolved_tokenizer_path(self) -> str | None:
        """data.tokenizer_path, else the TOKENIZER_PATH environment variable (set from --tokenizer-path)."""
        return self.tokenizer_path or os.environ.get("TOKENIZER_PATH") or None

    @property
    def window_frames(self) -> int:
        """Frames per sample: ``action_chunk_length + 1``."""
        return self.action_chunk_length + 1

    def validate(self) -> list[str]:
        """Rules spanning fields."""
        problems = super().validate()
        keys = [self.joint_action_key, self.gripper_action_key, self.joint_state_key, self.gripper_state_key]
        if len(set(keys)) != len(keys):
            problems.append(f"data.joint_action_key / gripper_action_key / joint_state_key / gripper_state_key must "
                            f"be four different columns (got {keys})")
        if self.camera_keys is not None and len(set(self.camera_keys)) != len(self.camera_keys):
            problems.append(f"data.camera_keys: the three cameras must be different (got {self.camera_keys})")
        return problems
