"""The LingBot-VA transformer: one Wan2.2 TI2V-5B-shaped DiT shared by a video stream and an action stream.

Video latents [B, C, F, H, W] are cut into (1, 2, 2) patches and embedded by a Linear (in place of Wan's
Conv3d, same weights reshaped); actions [B, A, F, n, 1] become n tokens per latent frame through
``action_embedder``. Each token gets its own timestep embedding (video tokens through
``condition_embedder``, action tokens through ``condition_embedder_action``), RoPE from explicit grid ids
and text cross-attention. Reference: LingBot-VA (Robbyant/lingbot-va ``wan_va/modules/model.py``; lerobot
``policies/lingbot_va/utils.py`` ``WanTransformer3DModel``); the tensor conventions are spelled out in
``../shared/fixtures/lingbot_va_lerobot/README.md``.

Legend: B batch, C latent channels, F latent frames, A action channels, n actions per frame, L tokens,
D width, P = prod(patch_size).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from diffusers.models.normalization import FP32LayerNorm
from diffusers.models.transformers.transformer_wan import WanTimeTextImageEmbedding
from torch import nn

from embodied_core.trainer.activation_checkpoint import is_checkpointed, set_activation_checkpointing
from embodied_models.lingbot_va.blocks import LingBotBlock
from embodied_models.lingbot_va.masks import StreamLayout, dense_stream_mask, flex_stream_mask
from embodied_models.lingbot_va.rope import GridRope
from embodied_models.wan.patch import patchify, token_grid, unpatchify

__all__ = ["LingBotVATransformer"]


class LingBotVATransformer(ModelMixin, ConfigMixin):
    """Dual-stream (video + action) Wan2.2 DiT. Keys match LingBot-VA's ``transformer/`` checkpoints.

    A diffusers ``ModelMixin`` so a saved ``transformer/`` folder loads with ``from_pretrained``.
    """

    _no_split_modules: ClassVar[list[str]] = ["LingBotBlock"]
    _supports_gradient_checkpointing = True

    @register_to_config
    def __init__(self, patch_size: tuple[int, int, int] = (1, 2, 2), num_attention_heads: int = 24,
                 attention_head_dim: int = 128, in_channels: int = 48, out_channels: int = 48, action_dim: int = 30,
                 text_dim: int = 4096, freq_dim: int = 256, ffn_dim: int = 14336, num_layers: int = 30,
                 cross_attn_norm: bool = True, eps: float = 1e-6, rope_theta: float = 10000.0,
                 attention_backend: str = "auto") -> None:
        super().__init__()
        dim = num_attention_heads * attention_head_dim
        self.patch_size = tuple(patch_size)
        self.attention_backend = attention_backend
        self.rope = GridRope(attention_head_dim, rope_theta)
        self.patch_embedding_mlp = nn.Linear(in_channels * math.prod(self.patch_size), dim)
        self.action_embedder = nn.Linear(action_dim, dim)
        self.condition_embedder = WanTimeTextImageEmbedding(dim=dim, time_freq_dim=freq_dim, time_proj_dim=dim * 6,
                                                            text_embed_dim=text_dim)
        self.condition_embedder_action = WanTimeTextImageEmbedding(dim=dim, time_freq_dim=freq_dim,
                                                                   time_proj_dim=dim * 6, text_embed_dim=text_dim)
        # Kept for checkpoint compatibility but never used (text goes through condition_embedder for both
        # streams); frozen so DDP/FSDP do not wait for gradients that never come.
        self.condition_embedder_action.text_embedder.requires_grad_(False)
        self.blocks = nn.ModuleList([LingBotBlock(dim, ffn_dim, num_attention_heads, cross_attn_norm=cross_attn_norm,
                                                  eps=eps) for _ in range(num_layers)])
        for index, block in enumerate(self.blocks):
            block.attn1.processor.layer_index = index  # selects the block's KV cache in streaming inference
        self.norm_out = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(dim, out_channels * math.prod(self.patch_size))
        self.action_proj_out = nn.Linear(dim, action_dim)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, dim) / dim**0.5)

    @property
    def gradient_checkpointing(self) -> bool:
        """Whether every block recomputes its activations in backward. Setting it (also diffusers'
        ``enable_gradient_checkpointing()``) switches core's non-reentrant activation checkpointing of the blocks,
        the mechanism of ``--activation-checkpoint-module-patterns``."""
        return bool(len(self.blocks)) and all(is_checkpointed(block) for block in self.blocks)

    @gradient_checkpointing.setter
    def gradient_checkpointing(self, enabled: bool) -> None:
        for block in self.blocks:
            set_activation_checkpointing(block, bool(enabled))

    # ------------------------------------------------------------------ embeddings
    def embed_video(self, latents: torch.Tensor) -> torch.Tensor:
        """[B, C, F, H, W] -> [B, F*h*w, D]; token features ordered (channel, pt, ph, pw) like Conv3d weights."""
        x = patchify(latents, self.patch_size)
        return self.patch_embedding_mlp(x.to(self.patch_embedding_mlp.weight.dtype))

    def embed_action(self, actions: torch.Tensor) -> torch.Tensor:
        """[B, A, F, n, 1] -> [B, F*n, D]; tokens ordered (frame, j)."""
        x = actions.flatten(2).transpose(1, 2)
        return self.action_embedder(x.to(self.action_embedder.weight.dtype))

    def embed_text(self, text: torch.Tensor) -> torch.Tensor:
        """Text-encoder output [B, T, text_dim] -> [B, T, D] (shared by both streams)."""
        text_embedder = self.condition_embedder.text_embedder
        return text_embedder(text.to(text_embedder.linear_1.weight.dtype))

    def embed_time(self, timesteps: torch.Tensor, tokens_per_frame: int, *, action: bool,
                   dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-frame timesteps (0..1000) -> per-token (temb [B, L, D], timestep_proj [B, L, 6, D])."""
        embedder = self.condition_embedder_action if action else self.condition_embedder
        t = timesteps.repeat_interleave(tokens_per_frame, dim=1)
        b, length = t.shape
        freqs = embedder.timesteps_proj(t.flatten())
        freqs = freqs.to(embedder.time_embedder.linear_1.weight.dtype)
        temb = embedder.time_embedder(freqs).to(dtype)
        proj = embedder.time_proj(embedder.act_fn(temb))
        return temb.reshape(b, length, -1), proj.reshape(b, length, 6, -1)

    # ------------------------------------------------------------------ trunk and heads
    def _blocks(self, x: torch.Tensor, text: torch.Tensor, proj: torch.Tensor,
                rope: torch.Tensor, mask: Any) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, text, proj, rope, mask)
        return x

    def _head(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        shift, scale = (self.scale_shift_table.unsqueeze(0) + temb.unsqueeze(2)).unbind(dim=2)
        return (self.norm_out(x.float()) * (1 + scale) + shift).type_as(x)

    def trunk(self, x: torch.Tensor, text: torch.Tensor, temb: torch.Tensor, proj: torch.Tensor,
              grid_ids: torch.Tensor, mask: Any) -> torch.Tensor:
        """Embedded tokens [B, L, D] -> blocks -> modulated output norm [B, L, D] (before the output heads)."""
        return self._head(self._blocks(x, self.embed_text(text), proj, self.rope(grid_ids), mask), temb)

    def video_head(self, x: torch.Tensor) -> torch.Tensor:
        """Normalized video tokens [B, L, D] -> velocity rows [B, L*P, C_out] ordered (token, patch position)."""
        return self._video_out(x)

    def _video_out(self, x: torch.Tensor) -> torch.Tensor:
        # Per token the output features are ordered (patch position, channel): rows become (token, patch).
        out = self.proj_out(x)
        return out.reshape(out.shape[0], -1, self.config.out_channels)

    def video_pred_to_grid(self, pred: torch.Tensor, num_frames: int, height: int, width: int) -> torch.Tensor:
        """Video prediction rows [B, L*P, C] (token, patch position) -> latent grid [B, C, F, H, W]."""
        return unpatchify(pred, token_grid((num_frames, height, width), self.patch_size), self.patch_size)

    def _use_flex(self, device: torch.device) -> bool:
        if self.attention_backend == "flex":
            return True
        return self.attention_backend == "auto" and device.type == "cuda"

    # ------------------------------------------------------------------ forwards
    def forward_train(self, *, noisy_video: torch.Tensor, clean_video: torch.Tensor, noisy_action: torch.Tensor,
                      clean_action: torch.Tensor, video_timesteps: torch.Tensor, clean_video_timesteps: torch.Tensor,
                      action_timesteps: torch.Tensor, clean_action_timesteps: torch.Tensor,
                      video_grid_ids: torch.Tensor, action_grid_ids: torch.Tensor, text: torch.Tensor,
                      chunk_size: int, window_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The four-stream training forward under the block-causal window mask.

        Args:
            noisy_video, clean_video: [B, C, F, H, W].
            noisy_action, clean_action: [B, A, F, n, 1].
            video_timesteps, clean_video_timesteps, action_timesteps, clean_action_timesteps: [B, F] (0..1000).
            video_grid_ids: [B, 4, F*h*w]; action_grid_ids: [B, 4, F*n].
            text: text-encoder output [B, T, text_dim].
            chunk_size, window_size: mask parameters (see :mod:`.masks`).

        Returns:
            (video velocity [B, F*h*w*P, C_out] with rows (token, patch position), action velocity [B, F*n, A]).
        """
        pt, ph, pw = self.patch_size
        _, _, num_frames, height, width = noisy_video.shape
        video_per_frame = (height // ph) * (width // pw)
        action_per_frame = noisy_action.shape[3] * noisy_action.shape[4]
        layout = StreamLayout(num_frames // pt, video_per_frame, action_per_frame)
        x = torch.cat([self.embed_video(noisy_video), self.embed_video(clean_video),
                       self.embed_action(noisy_action), self.embed_action(clean_action)], dim=1)
        grid = torch.cat([video_grid_ids, video_grid_ids, action_grid_ids, action_grid_ids], dim=2)
        v_temb, v_proj = self.embed_time(torch.cat([video_timesteps, clean_video_timesteps], dim=1),
                                         video_per_frame, action=False, dtype=x.dtype)
        a_temb, a_proj = self.embed_time(torch.cat([action_timesteps, clean_action_timesteps], dim=1),
                                         action_per_frame, action=True, dtype=x.dtype)
        temb, proj = torch.cat([v_temb, a_temb], dim=1), torch.cat([v_proj, a_proj], dim=1)
        build_mask = flex_stream_mask if self._use_flex(x.device) else dense_stream_mask
        mask = build_mask(layout, chunk_size=chunk_size, window_size=window_size, device=x.device)
        x = self.trunk(x, text, temb, proj, grid, mask)
        num_video, num_action = layout.num_video_tokens, layout.num_action_tokens
        video = self._video_out(x[:, :num_video])
        action = self.action_proj_out(x[:, 2 * num_video:2 * num_video + num_action])
        return video, action

    def forward(self, stream: torch.Tensor, timesteps: torch.Tensor, grid_ids: torch.Tensor, text: torch.Tensor,
                *, action_mode: bool = False, attention_mask: Any = None) -> torch.Tensor:
        """Single-stream forward (one denoising step of video or of actions), full attention by default.

        Args:
            stream: video latents [B, C, F, H, W], or actions [B, A, F, n, 1] when ``action_mode``.
            timesteps: [B, F] per-frame timesteps (0..1000).
            grid_ids: [B, 4, L] RoPE grid ids of the stream's tokens.
            text: text-encoder output [B, T, text_dim].
            attention_mask: optional boolean [L, L] mask.

        Returns:
            video velocity [B, L*P, C_out] (rows (token, patch position)) or action velocity [B, L, A].
        """
        if action_mode:
            x = self.embed_action(stream)
            per_frame = stream.shape[3] * stream.shape[4]
        else:
            x = self.embed_video(stream)
            per_frame = (stream.shape[3] // self.patch_size[1]) * (stream.shape[4] // self.patch_size[2])
        temb, proj = self.embed_time(timesteps, per_frame, action=action_mode, dtype=x.dtype)
        x = self.trunk(x, text, temb, proj, grid_ids, attention_mask)
        return self.action_proj_out(x) if action_mode else self._video_out(x)
