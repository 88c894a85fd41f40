"""The block-causal window mask between the noisy and clean streams of video and action.

Token order of one element: ``[noisy video | clean video | noisy action | clean action]``. Frames are
grouped in chunks of ``chunk_size`` latent frames; chunk ``c`` gets frame id ``2c`` for video tokens and
``2c + 1`` for action tokens, so a chunk's actions come after its video in time. Query q may attend key k when

- both are clean and ``fid_k <= fid_q`` (clean history is causal, including its own chunk);
- q is noisy, k is clean and ``fid_k < fid_q`` (denoising sees strictly earlier clean context);
- both are noisy and ``fid_k == fid_q`` (a noisy chunk attends within itself);

and always ``|fid_q - fid_k| <= window_size``. Clean queries never see noisy keys. This is the mask of the
LingBot-VA reference (``FlexAttnFunc._get_mask_mod`` in lerobot ``policies/lingbot_va/utils.py``), written
per element: the reference packs the batch into one sequence with per-element ids, which is equivalent.
The mask is the same for every element of a batch (all share the frame layout), so it has no batch axis.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

__all__ = ["StreamLayout", "dense_stream_mask", "flex_stream_mask", "stream_token_ids"]


@attrs.frozen
class StreamLayout:
    """Token counts of the four streams of one element.

    Attributes:
        num_frames: latent frames F (shared by video and action).
        video_tokens_per_frame: video tokens per latent frame (after patching).
        action_tokens_per_frame: action tokens per latent frame.
    """

    num_frames: int
    video_tokens_per_frame: int
    action_tokens_per_frame: int

    @property
    def num_video_tokens(self) -> int:
        """Tokens of one video stream."""
        return self.num_frames * self.video_tokens_per_frame

    @property
    def num_action_tokens(self) -> int:
        """Tokens of one action stream."""
        return self.num_frames * self.action_tokens_per_frame

    @property
    def num_tokens(self) -> int:
        """Tokens of the four streams together."""
        return 2 * (self.num_video_tokens + self.num_action_tokens)


def stream_token_ids(layout: StreamLayout, chunk_size: int,
                     device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token (frame id, is_clean) over the four streams, each [L] int64."""
    frames = torch.arange(layout.num_frames, device=device) // chunk_size * 2
    video = frames.repeat_interleave(layout.video_tokens_per_frame)
    action = (frames + 1).repeat_interleave(layout.action_tokens_per_frame)
    frame_ids = torch.cat([video, video, action, action])
    clean = torch.cat([torch.zeros_like(video), torch.ones_like(video),
                       torch.zeros_like(action), torch.ones_like(action)])
    return frame_ids, clean


def _allowed(fq: torch.Tensor, cq: torch.Tensor, fk: torch.Tensor, ck: torch.Tensor,
             window_size: int | torch.Tensor) -> torch.Tensor:
    """The rule of the module docstring, elementwise (shared by the dense and the flex mask)."""
    clean_to_clean = (cq == 1) & (ck == 1) & (fk <= fq)
    noisy_to_clean = (cq == 0) & (ck == 1) & (fk < fq)
    noisy_to_noisy = (cq == 0) & (ck == 0) & (fk == fq)
    return (clean_to_clean | noisy_to_clean | noisy_to_noisy) & ((fq - fk).abs() <= window_size)


def dense_stream_mask(layout: StreamLayout, *, chunk_size: int, window_size: int,
                      device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean mask [L, L], True where query (row) may attend key (column)."""
    frame_ids, clean = stream_token_ids(layout, chunk_size, device)
    return _allowed(frame_ids[:, None], clean[:, None], frame_ids[None, :], clean[None, :], window_size)


def flex_stream_mask(layout: StreamLayout, *, chunk_size: int, window_size: int,
                     device: torch.device | str) -> Any:
    """The same mask as a flex-attention ``BlockMask`` (block-sparse; skips fully masked tiles on GPU)."""
    from torch.nn.attention.flex_attention import create_block_mask

    frame_ids, clean = stream_token_ids(layout, chunk_size, device)

    def mask_mod(b: Any, h: Any, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return _allowed(frame_ids[q_idx], clean[q_idx], frame_ids[kv_idx], clean[kv_idx], window_size)

    length = layout.num_tokens
    return create_block_mask(mask_mod, None, None, length, length, device=device)
