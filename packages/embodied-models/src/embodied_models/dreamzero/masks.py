"""The block-causal teacher-forcing attention mask of DreamZero's DiT, as one boolean matrix (True = attend).

Token order of a training sequence (``F`` latent frames of ``s`` tokens, ``n = (F - 1) / fpb`` blocks):
``[clean video F*s | noisy video F*s | actions n*apb | states n*spb]``.

- clean frame 0 sees clean frame 0; a clean frame of block b sees clean frame 0 and the clean frames of blocks
  <= b inside the window of ``window`` frames ending at block b's end (LoongForge's local attention);
- noisy frame 0 sees itself only;
- a noisy frame and an action of block b see clean frames ``[0, 1 + b*fpb)`` (the first frame and every earlier
  block, no window), the noisy frames of block b, the actions of block b and the states of block b;
- a state of block b sees the states of block b.

LoongForge builds the same pattern from per-block flash-attention calls; with ``max_chunk_size = -1`` its clean
video is causal token by token, here it is always block-causal (the presets set ``max_chunk_size``).
"""

from __future__ import annotations

from functools import lru_cache

import torch

__all__ = ["Layout", "teacher_forcing_mask"]


class Layout:
    """Where each stream sits in the sequence.

    Args:
        num_frames: latent frames F (1 + blocks * fpb).
        frame_tokens: tokens per latent frame.
        frames_per_block, actions_per_block, states_per_block: the block shape.
    """

    def __init__(self, num_frames: int, frame_tokens: int, frames_per_block: int, actions_per_block: int,
                 states_per_block: int) -> None:
        if (num_frames - 1) % frames_per_block or num_frames < 1 + frames_per_block:
            raise ValueError(f"{num_frames} latent frames do not split into 1 + blocks of {frames_per_block} frames")
        self.num_frames = num_frames
        self.frame_tokens = frame_tokens
        self.fpb, self.apb, self.spb = frames_per_block, actions_per_block, states_per_block
        self.num_blocks = (num_frames - 1) // frames_per_block
        self.video = num_frames * frame_tokens
        self.num_actions = self.num_blocks * actions_per_block
        self.num_states = self.num_blocks * states_per_block
        self.noisy_start = self.video
        self.action_start = 2 * self.video
        self.state_start = self.action_start + self.num_actions
        self.total = self.state_start + self.num_states

    def key(self) -> tuple[int, ...]:
        """Hashable identity."""
        return (self.num_frames, self.frame_tokens, self.fpb, self.apb, self.spb)


@lru_cache(maxsize=16)
def _mask(key: tuple[int, ...], window: int) -> torch.Tensor:
    lay = Layout(*key)
    s = lay.frame_tokens
    frame = torch.arange(lay.num_frames).repeat_interleave(s)  # frame of each video token
    block_of_frame = torch.where(frame == 0, torch.full_like(frame, -1), (frame - 1) // lay.fpb)
    action_block = torch.arange(lay.num_blocks).repeat_interleave(lay.apb)
    state_block = torch.arange(lay.num_blocks).repeat_interleave(lay.spb)
    mask = torch.zeros(lay.total, lay.total, dtype=torch.bool)
    clean = slice(0, lay.video)
    noisy = slice(lay.noisy_start, lay.action_start)
    acts = slice(lay.action_start, lay.state_start)
    states = slice(lay.state_start, lay.total)

    # clean video: frame 0 -> frame 0; block b -> frame 0 + clean frames of blocks <= b within the window
    qb, kf, kb = block_of_frame[:, None], frame[None, :], block_of_frame[None, :]
    block_end = 1 + (qb + 1) * lay.fpb  # first frame after the query's block
    in_window = (kf >= block_end - window) if window > 0 else torch.ones_like(kf, dtype=torch.bool)
    clean_q = torch.where(qb < 0, kf == 0, (kf == 0) | ((kb >= 0) & (kb <= qb) & in_window))
    mask[clean, clean] = clean_q

    # noisy video and actions of block b: clean frames < 1 + b*fpb, and block b's noisy frames, actions, states
    def block_rows(q_block: torch.Tensor) -> tuple[torch.Tensor, ...]:
        qb_ = q_block[:, None]
        return (frame[None, :] < 1 + qb_ * lay.fpb, block_of_frame[None, :] == qb_, action_block[None, :] == qb_,
                state_block[None, :] == qb_)

    for rows, q_block in ((noisy, block_of_frame), (acts, action_block)):
        to_clean, to_noisy, to_acts, to_states = block_rows(q_block)
        valid = (q_block >= 0)[:, None]
        mask[rows, clean] = to_clean & valid
        mask[rows, noisy] = to_noisy & valid
        mask[rows, acts] = to_acts & valid
        mask[rows, states] = to_states & valid
    first = slice(lay.noisy_start, lay.noisy_start + s)  # noisy frame 0 sees itself only
    mask[first, first] = True
    mask[states, states] = state_block[:, None] == state_block[None, :]
    return mask


def teacher_forcing_mask(layout: Layout, *, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean mask [L, L] of ``layout`` (True = attend); ``window`` in latent frames, <= 0 for none."""
    return _mask(layout.key(), int(window)).to(device)
