"""Autoregressive LingBot-VA inference with a per-layer KV cache (closed-loop, chunk by chunk).

Follows the reference's streaming server (lerobot ``LingBotVAPolicy._predict_chunk`` / ``_infer`` /
``_compute_kv_cache``; upstream ``wan_va_server.py``):

1. first chunk: the observed first latent frame is pinned (timestep 0) while the chunk's video is denoised; a last
   forward at timestep 0 writes the predicted video into the cache ("predicted" entries); the actions are then
   denoised attending to the cache (frame 0's actions pinned to 0) and written likewise;
2. after the robot executed the chunk: the predicted entries are dropped and the *observed* latents plus the
   *executed* actions are written instead (timestep 0), and the next chunk is predicted at the next frame offset.

The cache keeps the newest ``max_chunks`` written chunks (default ``model.attn_window // 2``, the reference's
sizing; the reference counts that capacity in tokens and, once full, evicts its oldest tokens, here whole chunks
go). Self-attention of every block reads ``[cache | current]`` with no mask; cross-attention is unchanged.
``model.video_exec_step`` k (-1: off) cuts the video loop after k Euler steps, the k-th forward writing the cache
(the reference's ``video_exec_step``).
With guidance > 1 and an empty-prompt embedding, the whole session runs a doubled batch (prompt, empty prompt).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import torch

from embodied_models.lingbot_va.blocks import attention
from embodied_models.lingbot_va.rope import action_grid_ids, video_grid_ids
from embodied_models.lingbot_va.streams import sigma_schedule

if TYPE_CHECKING:
    from embodied_models.lingbot_va.modeling import LingBotVAModel

__all__ = ["KVStream", "StreamingSession"]


@attrs.define
class _Segment:
    chunk: int
    predicted: bool
    keys: list[torch.Tensor]
    values: list[torch.Tensor]


class KVStream:
    """Per-layer key/value cache, passed to the blocks in place of an attention mask.

    ``write`` set to None only reads; ``("pred", chunk)`` or ``("real", chunk)`` also stores this forward's keys and
    values as one segment.
    """

    def __init__(self, num_layers: int, max_chunks: int) -> None:
        self.num_layers = num_layers
        self.max_chunks = max_chunks
        self.segments: list[_Segment] = []
        self.write: tuple[str, int] | None = None
        self._pending: _Segment | None = None

    def attend(self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """Attention of the current tokens over [cached | current] keys of ``layer``; stores them when writing."""
        keys = [s.keys[layer] for s in self.segments] + [key]
        values = [s.values[layer] for s in self.segments] + [value]
        if self.write is not None:
            if layer == 0:
                kind, chunk = self.write
                self._pending = _Segment(chunk, kind == "pred", [], [])
            self._pending.keys.append(key.detach())
            self._pending.values.append(value.detach())
            if layer == self.num_layers - 1:
                self.segments.append(self._pending)
                self._pending = None
                self._evict()
        return attention(query, torch.cat(keys, dim=1), torch.cat(values, dim=1), None)

    def drop_predicted(self) -> None:
        """Forgets the predicted entries (replaced by what was observed and executed)."""
        self.segments = [s for s in self.segments if not s.predicted]

    def _evict(self) -> None:
        chunks = sorted({s.chunk for s in self.segments})
        keep = set(chunks[-self.max_chunks:])
        self.segments = [s for s in self.segments if s.chunk in keep]


class StreamingSession:
    """Closed-loop inference of one episode (batch of episodes in lockstep).

    Args:
        model: a LingBot-VA model (eval mode is set).
        text_emb: prompt embedding [B, T, text_dim]; ``null_text_emb`` [B, T0, text_dim] enables guidance.
        max_chunks: cached chunks kept (default ``model.attn_window // 2``, as the reference).
        num_steps: denoising steps of both streams (default: the model config's).
    """

    def __init__(self, model: LingBotVAModel, text_emb: torch.Tensor, *, null_text_emb: torch.Tensor | None = None,
                 max_chunks: int | None = None, num_steps: int | None = None) -> None:
        self.model = model.eval()
        self.net = model.transformer
        self.cfg = model.config
        self.frames, self.n = model.data_config.num_latent_frames, model.data_config.action_per_frame
        self.num_steps = num_steps
        guided = max(self.cfg.guidance_scale, self.cfg.action_guidance_scale) > 1 and null_text_emb is not None
        text = text_emb
        if guided:
            pad = text.shape[1] - null_text_emb.shape[1]
            text = torch.cat([text_emb, torch.nn.functional.pad(null_text_emb.to(text.dtype), (0, 0, 0, pad))])
        self.text, self.reps, self.batch = text, 2 if guided else 1, text_emb.shape[0]
        self.cache = KVStream(len(self.net.blocks), max_chunks or self.cfg.attn_window // 2)
        self.frame_offset = 0
        self.chunk = 0
        self.init_latent: torch.Tensor | None = None

    # ------------------------------------------------------------------ forwards
    def _forward(self, stream: torch.Tensor, t: torch.Tensor, *, action: bool, write: tuple[str, int] | None,
                 scale: float) -> torch.Tensor:
        frames = stream.shape[2]
        if action:
            grid = action_grid_ids(frames, self.n, frame_offset=self.frame_offset, device=stream.device)
        else:
            pt, ph, pw = self.net.patch_size
            grid = video_grid_ids(frames // pt, stream.shape[3] // ph, stream.shape[4] // pw,
                                  frame_offset=self.frame_offset, device=stream.device)
        rows = self.batch * self.reps
        self.cache.write = write
        try:
            out = self.net(stream.repeat(self.reps, *[1] * (stream.dim() - 1)), t.repeat(self.reps, 1),
                           grid.expand(rows, -1, -1), self.text, action_mode=action, attention_mask=self.cache)
        finally:
            self.cache.write = None
        if action:
            out = out.unflatten(1, (frames, self.n)).permute(0, 3, 1, 2).unsqueeze(-1)
        else:
            out = self.net.video_pred_to_grid(out, frames, stream.shape[3], stream.shape[4])
        if self.reps == 1:
            return out
        cond, uncond = out.chunk(2)
        return uncond + scale * (cond - uncond) if scale > 1 else cond

    def _denoise(self, x: torch.Tensor, *, action: bool, pinned: torch.Tensor | None) -> torch.Tensor:
        cfg = self.cfg
        shift = cfg.action_snr_shift if action else cfg.snr_shift
        steps = self.num_steps or (cfg.action_num_inference_steps if action else cfg.num_inference_steps)
        scale = cfg.action_guidance_scale if action else cfg.guidance_scale
        full = [*sigma_schedule(shift, steps).tolist(), 0.0]
        # video_exec_step k: only the first k entries run, each one steps (the k-th also writes the cache)
        cut = not action and cfg.video_exec_step != -1
        sigmas = full[:cfg.video_exec_step] if cut else full
        for i, sigma in enumerate(sigmas):
            last = i == len(sigmas) - 1  # the extra forward at t=0 only writes the finished chunk into the cache
            if pinned is not None:
                x[:, :, :1] = pinned
            if action:
                x[:, self._unused(x.device)] = 0.0
            t = torch.full((x.shape[0], x.shape[2]), sigma * cfg.num_train_timesteps, device=x.device)
            if pinned is not None:
                t[:, 0] = 0.0
            velocity = self._forward(x, t, action=action, write=("pred", self.chunk) if last else None, scale=scale)
            if not last or cut:
                x = x + velocity.float() * (full[i + 1] - sigma)
        if pinned is not None:
            x[:, :, :1] = pinned
        return x

    def _unused(self, device: torch.device) -> torch.Tensor:
        unused = torch.ones(self.cfg.action_dim, dtype=torch.bool, device=device)
        unused[self.cfg.used_action_channel_ids] = False
        return unused

    # ------------------------------------------------------------------ API
    @torch.no_grad()
    def predict(self, noise: dict[str, torch.Tensor] | None = None,
                first_latent: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Predicts the next chunk: (normalized actions [B, steps, U], predicted latents [B, C, F, H, W]).

        ``first_latent`` [B, C, 1, H, W] (the first observation) is required for the first chunk; the first
        chunk returns the actions after frame 0, later chunks all ``F * n``.
        """
        first = self.frame_offset == 0
        if first:
            if first_latent is None:
                raise ValueError("the first chunk needs first_latent, the observed first latent frame")
            self.init_latent = first_latent.float()
        like = self.init_latent
        b, c, _, h, w = like.shape
        noise = noise or {"video": torch.randn(b, c, self.frames, h, w, generator=self.model.generator),
                          "action": torch.randn(b, self.cfg.action_dim, self.frames, self.n, 1,
                                                generator=self.model.generator)}
        video = self._denoise(noise["video"].to(like.device).float().clone(), action=False,
                              pinned=self.init_latent if first else None)
        zeros = torch.zeros(b, self.cfg.action_dim, 1, self.n, 1, device=like.device)
        actions = self._denoise(noise["action"].to(like.device).float().clone(), action=True,
                                pinned=zeros if first else None)
        actions[:, self._unused(actions.device)] = 0.0
        self.last_actions = actions
        picked = actions[:, self.cfg.used_action_channel_ids, 1 if first else 0:]
        return picked.squeeze(-1).flatten(2).transpose(1, 2).contiguous(), video

    @torch.no_grad()
    def observe(self, latents: torch.Tensor, actions: torch.Tensor | None = None) -> None:
        """Feeds back what happened: observed latents [B, C, F_obs, H, W] (after the first frame for the first
        chunk) and the executed actions [B, A, F, n, 1] (default: the last predicted ones)."""
        actions = self.last_actions if actions is None else actions
        self.cache.drop_predicted()
        if self.frame_offset == 0:
            latents = torch.cat([self.init_latent, latents.float()], dim=2)
        b, device = latents.shape[0], latents.device
        self._forward(latents.float(), torch.zeros(b, latents.shape[2], device=device), action=False,
                      write=("real", self.chunk), scale=1.0)
        self._forward(actions.float(), torch.zeros(b, actions.shape[2], device=device), action=True,
                      write=("real", self.chunk), scale=1.0)
        self.frame_offset += latents.shape[2]
        self.chunk += 1

    def segments(self) -> list[tuple[int, bool]]:
        """(chunk, predicted) of every cached segment, oldest first (for inspection and tests)."""
        return [(s.chunk, s.predicted) for s in self.cache.segments]

