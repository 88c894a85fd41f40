"""Closed-loop LingBot-VA control from raw camera frames: encode, predict a chunk, execute, feed back, repeat.

Glue of :class:`.vae.StreamingVAEEncoder` (observations -> latents with the causal VAE cache),
:class:`.streaming.StreamingSession` (KV-cached prediction) and quantile (un)normalization of actions, following
the reference client loop (lerobot ``LingBotVAPolicy.select_action``; upstream ``evaluation/libero/client.py``):
the first observation conditions the first chunk; after a chunk has been executed, the ``4 * video_stride``-strided
keyframes seen meanwhile and the executed actions are written into the cache before the next chunk is predicted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from embodied_models.lingbot_va.streaming import StreamingSession
from embodied_models.lingbot_va.vae import StreamingVAEEncoder

if TYPE_CHECKING:
    from embodied_models.lingbot_va.modeling import LingBotVAModel

__all__ = ["LingBotVAPolicy"]


class LingBotVAPolicy:
    """Actions in dataset units from camera frames, chunk by chunk.

    Args:
        model: a trained LingBot-VA model.
        vae: the Wan2.2 ``AutoencoderKLWan`` the training latents were made with.
        text_emb: the prompt's UMT5 embedding [T, text_dim] (e.g. ``text.safetensors`` of the latent cache).
        null_text_emb: the empty prompt's embedding (enables guidance).
        q01, q99: the dataset's action quantiles [D] (None: actions stay normalized).
        max_chunks, num_steps: see :class:`StreamingSession`.
    """

    def __init__(self, model: LingBotVAModel, *, vae: Any, text_emb: torch.Tensor,
                 null_text_emb: torch.Tensor | None = None, q01: torch.Tensor | None = None,
                 q99: torch.Tensor | None = None, max_chunks: int = 15, num_steps: int | None = None) -> None:
        self.model, self.vae = model, vae
        self.text_emb, self.null_text_emb = text_emb, null_text_emb
        self.q01, self.q99 = q01, q99
        self.max_chunks, self.num_steps = max_chunks, num_steps
        self.encoder = StreamingVAEEncoder(vae, model.data_config)
        self.session: StreamingSession | None = None

    def _unnormalize(self, actions: torch.Tensor) -> torch.Tensor:
        if self.q01 is None:
            return actions
        q01, q99 = self.q01.to(actions.device), self.q99.to(actions.device)
        return (actions + 1.0) / 2.0 * (q99 - q01 + 1e-6) + q01

    def _normalize(self, actions: torch.Tensor) -> torch.Tensor:
        if self.q01 is None:
            return actions
        q01, q99 = self.q01.to(actions.device), self.q99.to(actions.device)
        return (actions - q01) / (q99 - q01 + 1e-6) * 2.0 - 1.0

    @torch.no_grad()
    def reset(self, first_frames: Sequence[torch.Tensor]) -> torch.Tensor:
        """Starts an episode from the first observation (one uint8 [3, H, W] frame per camera, ``data.camera_keys``
        order) and returns the first chunk's actions [(F-1)*n, D] in dataset units."""
        self.encoder.reset()
        device = next(self.model.parameters()).device
        null = self.null_text_emb[None].to(device) if self.null_text_emb is not None else None
        self.session = StreamingSession(self.model, self.text_emb[None].to(device), null_text_emb=null,
                                        max_chunks=self.max_chunks, num_steps=self.num_steps)
        first = self.encoder([frame[None] for frame in first_frames]).to(device)
        actions, _ = self.session.predict(first_latent=first)
        return self._unnormalize(actions[0])

    @torch.no_grad()
    def step(self, keyframes: Sequence[torch.Tensor], executed: torch.Tensor | None = None) -> torch.Tensor:
        """Feeds back the chunk just executed and returns the next chunk's actions [F*n, D] in dataset units.

        Args:
            keyframes: per camera uint8 [4 * frames, 3, H, W], the frames seen while executing the chunk (every
                ``data.video_stride``-th), i.e. 4(F-1) after the first chunk and 4F afterwards.
            executed: the executed actions [steps, D] in dataset units (default: the predicted ones).
        """
        if self.session is None:
            raise RuntimeError("call reset(first_frames) before step()")
        session, cfg = self.session, self.model.config
        latents = self.encoder(keyframes).to(session.last_actions.device)
        fed = session.last_actions
        if executed is not None:
            first = session.frame_offset == 0
            n = self.model.data_config.action_per_frame
            steps = self._normalize(executed.to(fed.device).float())  # [steps, D]
            fed = torch.zeros_like(fed)
            offset = 1 if first else 0  # frame 0 of the first chunk is the observation: no actions
            grid = steps.T.reshape(len(cfg.used_action_channel_ids), -1, n)  # [U, frames, n]
            fed[0, cfg.used_action_channel_ids, offset:offset + grid.shape[1]] = grid.unsqueeze(-1)
        session.observe(latents, fed)
        actions, _ = session.predict()
        return self._unnormalize(actions[0])
