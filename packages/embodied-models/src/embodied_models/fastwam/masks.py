"""The MoT self-attention mask of FastWAM over ``[video tokens | action tokens]`` (True = query may attend key).

- video -> video: ``video_attention_mask_mode`` (first_frame_causal: frame-0 tokens see only frame 0, later tokens
  see every video token; bidirectional: all; per_frame_causal: frame f sees frames <= f);
- action -> action: all;
- action -> video: the first (clean) frame only (variants ``base`` / ``uncond``), or every video token
  (``joint``);
- video -> action: never, so the video prediction does not depend on the actions and the first frame's K/V can be
  cached for sampling.

Variant ``idm`` trains on ``[noisy video | teacher-forced video copy | actions]`` (:func:`idm_attention_mask`):
each video part attends within itself (``video_mode``), actions attend to actions and to the copy only.

Video tokens are ordered (frame, h, w): frame f holds tokens ``[f * per_frame, (f + 1) * per_frame)``.
"""

from __future__ import annotations

import torch

__all__ = ["idm_attention_mask", "mot_attention_mask", "video_attention_mask"]


def video_attention_mask(num_video: int, per_frame: int, mode: str,
                         device: torch.device | str | None = None) -> torch.Tensor:
    """Video -> video mask [Lv, Lv]."""
    if num_video % per_frame:
        raise ValueError(f"{num_video} video tokens are not whole frames of {per_frame} tokens")
    if mode == "bidirectional":
        return torch.ones(num_video, num_video, dtype=torch.bool, device=device)
    if mode == "per_frame_causal":
        frame = torch.arange(num_video, device=device) // per_frame
        return frame[None, :] <= frame[:, None]
    if mode == "first_frame_causal":
        mask = torch.ones(num_video, num_video, dtype=torch.bool, device=device)
        mask[:per_frame, per_frame:] = False
        return mask
    raise ValueError(f"video attention mask mode {mode!r}: valid are first_frame_causal, bidirectional, "
                     "per_frame_causal")


def mot_attention_mask(num_video: int, per_frame: int, num_action: int, *, variant: str, video_mode: str,
                       device: torch.device | str | None = None) -> torch.Tensor:
    """The joint mask [Lv + La, Lv + La] of the module docstring."""
    total = num_video + num_action
    mask = torch.zeros(total, total, dtype=torch.bool, device=device)
    mask[:num_video, :num_video] = video_attention_mask(num_video, per_frame, video_mode, device)
    mask[num_video:, num_video:] = True
    seen = num_video if variant == "joint" else min(per_frame, num_video)
    mask[num_video:, :seen] = True
    return mask


def idm_attention_mask(num_video: int, per_frame: int, num_action: int, *, video_mode: str,
                       device: torch.device | str | None = None) -> torch.Tensor:
    """The ``idm`` training mask [2 Lv + La, 2 Lv + La] over [noisy video | video copy | actions]."""
    total = 2 * num_video + num_action
    video = video_attention_mask(num_video, per_frame, video_mode, device)
    mask = torch.zeros(total, total, dtype=torch.bool, device=device)
    mask[:num_video, :num_video] = video
    mask[num_video:2 * num_video, num_video:2 * num_video] = video
    mask[2 * num_video:, num_video:] = True
    return mask
