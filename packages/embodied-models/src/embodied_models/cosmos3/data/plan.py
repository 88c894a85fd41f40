"""``SequencePlan``: which modalities a Cosmos3 sample carries and which of their frames are clean conditioning."""

from __future__ import annotations

import attrs

from embodied_core.errors import DataError

__all__ = ["SequencePlan", "policy_plan"]


@attrs.define(kw_only=True)
class SequencePlan:
    """Per-sample modality plan (field names and meaning as NVIDIA's Cosmos3 training code).

    Attributes:
        has_text: caption tokens are present.
        has_vision: a video is present.
        condition_frame_indexes_vision: latent video frames kept clean (conditioning, not supervised).
        share_vision_temporal_positions: all vision items share one temporal position grid.
        has_action: an action sequence is present.
        condition_frame_indexes_action: action rows kept clean.
        action_start_frame_offset: video frame the first action row belongs to.
        has_sound: a sound track is present.
        condition_frame_indexes_sound: sound frames kept clean.
    """

    has_text: bool
    has_vision: bool = False
    condition_frame_indexes_vision: list[int] = attrs.field(factory=list)
    share_vision_temporal_positions: bool = False
    has_action: bool = False
    condition_frame_indexes_action: list[int] = attrs.field(factory=list)
    action_start_frame_offset: int = 1
    has_sound: bool = False
    condition_frame_indexes_sound: list[int] = attrs.field(factory=list)


def policy_plan(*, video_length: int, action_length: int | None, has_text: bool = True) -> SequencePlan:
    """The plan of a policy sample: video frame 0 is the condition; the actions either start with the observed
    state (``action_length == video_length``: row 0 clean, offset 0) or follow it (``video_length - 1``: no clean
    row, offset 1). ``action_length`` None: a sample without actions (inference observations)."""
    if action_length is None:
        return SequencePlan(has_text=has_text, has_vision=True, condition_frame_indexes_vision=[0])
    if action_length == video_length:
        clean, offset = [0], 0
    elif action_length == video_length - 1:
        clean, offset = [], 1
    else:
        raise DataError(f"a Cosmos3 policy sample needs as many action rows as video frames (or one fewer); got "
                        f"{action_length} action rows and {video_length} frames (data.action_chunk_length must be "
                        f"a multiple of the VAE's temporal compression)")
    return SequencePlan(has_text=has_text, has_vision=True, condition_frame_indexes_vision=[0], has_action=True,
                        condition_frame_indexes_action=clean, action_start_frame_offset=offset)
