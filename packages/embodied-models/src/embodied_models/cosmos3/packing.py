"""Per-sample Cosmos3 sequences (text, then video latent patches, then action rows) padded into one batch.

Layout of one sample, as LoongForge's ``pack_input_sequence`` builds it for the action policy: the caption's
token ids, the EOS token and the start-of-generation token (the understanding pathway), then the latent patches
frame by frame and the action rows (the generation pathway). Unified 3-D mRoPE positions (diffusers' helpers,
the same formulas): text tokens count up from 0 on all three axes; video and action share the temporal origin
``text length + margin``; with fps modulation a latent frame k sits at ``k * base_fps / fps`` and action row i
at ``(i + action_start_frame_offset) * base_fps / (4 * fps)`` (one action per video frame, four video frames per
latent frame); spatial positions restart at 0 per video. Samples are right-padded to the longest text and the
longest generation part; the masks in :mod:`embodied_models.cosmos3.network` keep samples apart.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from embodied_models.cosmos3.config import Cosmos3ModelConfig
from embodied_models.cosmos3.network import GenInputs, NetInputs

__all__ = ["pack_batch", "sample_positions"]


def sample_positions(config: Cosmos3ModelConfig, *, text_len: int, grid: tuple[int, int, int], action_len: int,
                     fps: float, action_start_frame_offset: int, temporal_compression: int) -> torch.Tensor:
    """mRoPE positions ``[3, text_len + T*h*w + action_len]`` of one sample (float32)."""
    from diffusers.pipelines.cosmos.pipeline_cosmos3_omni import (
        get_3d_mrope_ids_text_tokens,
        get_3d_mrope_ids_vae_tokens,
    )

    text, offset = get_3d_mrope_ids_text_tokens(text_len, 0, use_float_positions=config.enable_fps_modulation)
    offset = offset + config.mrope_temporal_modality_margin
    rate = float(fps) if config.enable_fps_modulation else None
    t, h, w = grid
    vision, _ = get_3d_mrope_ids_vae_tokens(t, h, w, offset, reset_spatial_indices=config.mrope_reset_spatial_ids,
                                           fps=rate, base_fps=float(config.base_fps),
                                           temporal_compression_factor=temporal_compression)
    action, _ = get_3d_mrope_ids_vae_tokens(action_len, 1, 1, offset,
                                           reset_spatial_indices=config.mrope_reset_spatial_ids, fps=rate,
                                           base_fps=float(config.base_fps), temporal_compression_factor=1,
                                           base_temporal_compression_factor=temporal_compression,
                                           start_frame_offset=action_start_frame_offset)
    return torch.cat([text.float(), vision.float(), action.float()], dim=1)


def pack_batch(config: Cosmos3ModelConfig, text_ids: Sequence[Sequence[int]], gen: Sequence[GenInputs],
               fps: Sequence[float], action_start_frame_offsets: Sequence[int], *,
               temporal_compression: int) -> NetInputs:
    """The padded :class:`NetInputs` of a batch: caption ids (without the special tokens) and generation inputs."""
    p = config.latent_patch_size
    texts = [[*map(int, ids), config.eos_token_id, config.start_of_generation_token_id] for ids in text_ids]
    grids = [(g.latent.shape[1], -(-g.latent.shape[2] // p), -(-g.latent.shape[3] // p)) for g in gen]
    gen_lens = [t * h * w + g.actions.shape[0] for (t, h, w), g in zip(grids, gen, strict=True)]
    lu, lg, b = max(map(len, texts)), max(gen_lens), len(texts)
    ids = torch.zeros(b, lu, dtype=torch.long)
    und_valid = torch.zeros(b, lu, dtype=torch.bool)
    gen_valid = torch.zeros(b, lg, dtype=torch.bool)
    positions = torch.zeros(3, b, lu + lg, dtype=torch.float32)
    for i, (text, grid, g) in enumerate(zip(texts, grids, gen, strict=True)):
        ids[i, : len(text)] = torch.tensor(text, dtype=torch.long)
        und_valid[i, : len(text)] = True
        gen_valid[i, : gen_lens[i]] = True
        pos = sample_positions(config, text_len=len(text), grid=grid, action_len=g.actions.shape[0], fps=fps[i],
                               action_start_frame_offset=int(action_start_frame_offsets[i]),
                               temporal_compression=temporal_compression)
        positions[:, i, : len(text)] = pos[:, : len(text)]
        positions[:, i, lu: lu + gen_lens[i]] = pos[:, len(text):]
    return NetInputs(text_ids=ids, und_valid=und_valid, gen_valid=gen_valid, position_ids=positions, gen=list(gen))
