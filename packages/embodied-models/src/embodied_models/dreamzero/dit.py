"""DreamZero's causal chunked Wan DiT: video latents, action and state tokens in one block-causal sequence.

Module names follow original Wan / LoongForge's ``CausalWanModel`` (``blocks.N.self_attn.q``, ``cross_attn.k_img``,
``ffn.0``, ``modulation``, ``head.head``, ``img_emb.proj.1``, ``state_encoder.layer1.W`` ...), so LoongForge
checkpoints load with the identity map and diffusers shards through :mod:`.checkpoint`'s rename table.

One forward takes the teacher-forcing sequence of :mod:`.masks`: the clean latents (timestep 0) and the noisy
latents share RoPE positions (frame, h, w); actions and states get 1-D RoPE over the whole head from position 0.
Every token has its own timestep: clean 0, noisy video per latent frame, actions per action, states the
timestep of their block's first action. Pieces shared with the other Wan models come from
:mod:`embodied_models.wan` (q/k RMSNorm, SDPA dispatch, RoPE, timestep sinusoids, embedders, unpatchify).

Legend: B batch, C channels, F latent frames, L tokens, D width.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional
from torch.utils.checkpoint import checkpoint

from embodied_models.dreamzero.config import DreamZeroModelConfig
from embodied_models.dreamzero.embodiment import ActionEncoder, CategoryMLP
from embodied_models.dreamzero.masks import Layout, teacher_forcing_mask
from embodied_models.wan.attention import WanRMSNorm, attention
from embodied_models.wan.modulation import (
    modulate,
    modulation_chunks,
    sinusoidal_embedding,
    text_embedding,
    time_embedding,
    time_projection,
)
from embodied_models.wan.patch import unpatchify
from embodied_models.wan.rope import GridRope, apply_rope, rope_split

__all__ = ["CausalWanBlock", "CausalWanDiT", "ImageProjection", "WanLayerNorm"]


class WanLayerNorm(nn.LayerNorm):
    """LayerNorm computed in float32 (Wan's), returned in float32."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., D] -> normalized float32 (the affine weights cast to float32 too)."""
        weight = self.weight.float() if self.weight is not None else None
        bias = self.bias.float() if self.bias is not None else None
        return functional.layer_norm(x.float(), self.normalized_shape, weight, bias, self.eps)


class SelfAttention(nn.Module):
    """q/k/v/o projections with q/k RMSNorm over the full width, RoPE and a boolean mask."""

    def __init__(self, dim: int, num_heads: int, eps: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.norm_q = WanRMSNorm(dim, eps)
        self.norm_k = WanRMSNorm(dim, eps)

    def forward(self, x: torch.Tensor, freqs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x [B, L, D] -> [B, L, D]."""
        q = apply_rope(self.norm_q(self.q(x)).unflatten(2, (self.num_heads, -1)), freqs)
        k = apply_rope(self.norm_k(self.k(x)).unflatten(2, (self.num_heads, -1)), freqs)
        v = self.v(x).unflatten(2, (self.num_heads, -1))
        return self.o(attention(q, k, v, mask).type_as(x))


class CrossAttention(nn.Module):
    """Wan's image-to-video cross-attention: text and image-encoder tokens attended separately, outputs summed."""

    def __init__(self, dim: int, num_heads: int, eps: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.k_img, self.v_img = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.norm_q = WanRMSNorm(dim, eps)
        self.norm_k = WanRMSNorm(dim, eps)
        self.norm_k_img = WanRMSNorm(dim, eps)

    def forward(self, x: torch.Tensor, text: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        """x [B, L, D], text [B, Lt, D], image [B, Li, D] -> [B, L, D]."""
        heads = (self.num_heads, -1)
        q = self.norm_q(self.q(x)).unflatten(2, heads)
        out = attention(q, self.norm_k(self.k(text)).unflatten(2, heads), self.v(text).unflatten(2, heads), None)
        img = attention(q, self.norm_k_img(self.k_img(image)).unflatten(2, heads),
                        self.v_img(image).unflatten(2, heads), None)
        return self.o((out + img).type_as(x))


class CausalWanBlock(nn.Module):
    """One DiT block: adaLN self-attention (block-causal), cross-attention, adaLN FFN (the FSDP / AC unit)."""

    def __init__(self, dim: int, ffn_dim: int, num_heads: int, eps: float) -> None:
        super().__init__()
        self.norm1 = WanLayerNorm(dim, eps, elementwise_affine=False)
        self.self_attn = SelfAttention(dim, num_heads, eps)
        self.norm3 = WanLayerNorm(dim, eps, elementwise_affine=True)
        self.cross_attn = CrossAttention(dim, num_heads, eps)
        self.norm2 = WanLayerNorm(dim, eps, elementwise_affine=False)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(approximate="tanh"), nn.Linear(ffn_dim, dim))
        self.modulation = nn.Parameter(torch.randn(1, 6, dim) / dim**0.5)

    def forward(self, x: torch.Tensor, t_mod: torch.Tensor, freqs: torch.Tensor, mask: torch.Tensor,
                text: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        """x [B, L, D], t_mod [B, L, 6, D] (float32) -> [B, L, D]."""
        shift, scale, gate, c_shift, c_scale, c_gate = modulation_chunks(self.modulation, t_mod)
        y = self.self_attn(modulate(self.norm1(x), shift, scale).type_as(x), freqs, mask)
        x = (x.float() + y.float() * gate).type_as(x)
        x = x + self.cross_attn(self.norm3(x).type_as(x), text, image)
        y = self.ffn(modulate(self.norm2(x), c_shift, c_scale).type_as(x))
        return (x.float() + y.float() * c_gate).type_as(x)


class ImageProjection(nn.Module):
    """Image-encoder tokens -> DiT width: LayerNorm, Linear, GELU, Linear, LayerNorm (Wan's ``img_emb``)."""

    def __init__(self, in_dim: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Sequential(nn.LayerNorm(in_dim), nn.Linear(in_dim, in_dim), nn.GELU(), nn.Linear(in_dim, dim),
                                  nn.LayerNorm(dim))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """[B, Li, in_dim] -> [B, Li, D]."""
        return self.proj(tokens)


class Head(nn.Module):
    """Output head: adaLN (table [1, 2, D] + time embedding) then Linear to patch features."""

    def __init__(self, dim: int, out_features: int, eps: float) -> None:
        super().__init__()
        self.norm = WanLayerNorm(dim, eps, elementwise_affine=False)
        self.head = nn.Linear(dim, out_features)
        self.modulation = nn.Parameter(torch.randn(1, 2, dim) / dim**0.5)

    def forward(self, x: torch.Tensor, t_emb: torch.Tensor) -> torch.Tensor:
        """x [B, L, D], t_emb [B, L, D] -> [B, L, out_features]."""
        shift, scale = modulation_chunks(self.modulation, t_emb.unsqueeze(2))
        return self.head(modulate(self.norm(x), shift, scale).type_as(x))


class CausalWanDiT(nn.Module):
    """The trainable part of DreamZero (LoongForge's ``CausalWanModel``).

    Args:
        cfg: the ``model:`` section.
    """

    def __init__(self, cfg: DreamZeroModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.dim
        self.patch_size = tuple(cfg.patch_size)
        self.patch_embedding = nn.Conv3d(cfg.in_dim, d, kernel_size=self.patch_size, stride=self.patch_size)
        self.text_embedding = text_embedding(cfg.text_dim, d)
        self.time_embedding = time_embedding(cfg.freq_dim, d)
        self.time_projection = time_projection(d)
        self.blocks = nn.ModuleList(CausalWanBlock(d, cfg.ffn_dim, cfg.num_heads, cfg.eps)
                                    for _ in range(cfg.num_layers))
        patch = self.patch_size[0] * self.patch_size[1] * self.patch_size[2]
        self.head = Head(d, patch * cfg.out_dim, cfg.eps)
        self.img_emb = ImageProjection(cfg.image_dim, d)
        self.state_encoder = CategoryMLP(cfg.num_embodiments, cfg.max_state_dim, cfg.action_state_hidden_size, d)
        self.action_encoder = ActionEncoder(cfg.num_embodiments, cfg.max_action_dim, d)
        self.action_decoder = CategoryMLP(cfg.num_embodiments, d, cfg.action_state_hidden_size, cfg.max_action_dim)
        self.video_rope = GridRope(cfg.head_dim, cfg.rope_theta, split=rope_split(cfg.head_dim, "pairs"))
        self.seq_rope = GridRope(cfg.head_dim, cfg.rope_theta, split=(cfg.head_dim,))
        self.gradient_checkpointing = cfg.gradient_checkpointing

    def _freqs(self, lay: Layout, grid: tuple[int, int, int], batch: int, device: torch.device) -> torch.Tensor:
        f, h, w = grid
        ff, hh, ww = torch.meshgrid(torch.arange(f, device=device), torch.arange(h, device=device),
                                    torch.arange(w, device=device), indexing="ij")
        video = torch.stack([ff.flatten(), hh.flatten(), ww.flatten()])
        vfreq = self.video_rope(video[None].float())
        afreq = self.seq_rope(torch.arange(lay.num_actions, device=device, dtype=torch.float32)[None, None])
        sfreq = self.seq_rope(torch.arange(lay.num_states, device=device, dtype=torch.float32)[None, None])
        return torch.cat([vfreq, vfreq, afreq, sfreq], dim=1).expand(batch, -1, -1, -1)

    def forward(self, noisy: torch.Tensor, clean: torch.Tensor, video_t: torch.Tensor, actions: torch.Tensor,
                action_t: torch.Tensor, state: torch.Tensor, embodiment: torch.Tensor, text: torch.Tensor,
                image: torch.Tensor, cond: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Velocity of the noisy latents [B, C, F, H, W] and of the noisy actions [B, n*apb, A].

        Args:
            noisy, clean: noisy / clean latents [B, C, F, H, W].
            video_t: timestep per latent frame [B, F] (0..1000 scale).
            actions: noisy actions [B, n*apb, A]; action_t: their timesteps [B, n*apb].
            state: states [B, n*spb, S]; embodiment: ids [B] (routed to 0 with one category).
            text: prompt embeddings [B, text_len, text_dim]; image: image-encoder tokens [B, Li, image_dim].
            cond: 'i2v' first-frame conditioning [B, 4 + C, F, H, W], concatenated to both copies.
        """
        cfg = self.cfg
        b = noisy.shape[0]
        dtype = self.patch_embedding.weight.dtype  # bf16 parameters (FSDP mixed precision) take bf16 latents
        noisy, clean = noisy.to(dtype), clean.to(dtype)
        if cond is not None:
            cond = cond.to(noisy.dtype)
            noisy, clean = torch.cat([noisy, cond], dim=1), torch.cat([clean, cond], dim=1)
        x_noisy = self.patch_embedding(noisy)
        grid = tuple(x_noisy.shape[2:])
        x_noisy = x_noisy.flatten(2).transpose(1, 2)
        x_clean = self.patch_embedding(clean).flatten(2).transpose(1, 2)
        frame_tokens = grid[1] * grid[2]
        lay = Layout(grid[0], frame_tokens, cfg.num_frame_per_block, cfg.num_action_per_block,
                     cfg.num_state_per_block)
        if actions.shape[1] != lay.num_actions or state.shape[1] != lay.num_states:
            raise ValueError(f"{grid[0]} latent frames in blocks of {cfg.num_frame_per_block} need "
                             f"{lay.num_actions} actions and {lay.num_states} states, got {actions.shape[1]} and "
                             f"{state.shape[1]}")
        ids = embodiment if cfg.num_embodiments > 1 else torch.zeros_like(embodiment)
        act_tokens = self.action_encoder(actions, action_t, ids)
        state_tokens = self.state_encoder(state, ids)
        x = torch.cat([x_clean, x_noisy, act_tokens.to(x_noisy.dtype), state_tokens.to(x_noisy.dtype)], dim=1)

        state_t = action_t[:, :: cfg.num_action_per_block // cfg.num_state_per_block]
        times = torch.cat([torch.zeros_like(video_t), video_t], dim=1).repeat_interleave(frame_tokens, dim=1)
        times = torch.cat([times, action_t.to(times.dtype), state_t.to(times.dtype)], dim=1)
        t_emb = self.time_embedding(sinusoidal_embedding(times, cfg.freq_dim).to(x.dtype))
        t_mod = self.time_projection(t_emb).unflatten(2, (6, cfg.dim)).float()

        text_tokens = self.text_embedding(text.to(x.dtype))
        image_tokens = self.img_emb(image.to(x.dtype))
        freqs = self._freqs(lay, grid, b, x.device)
        mask = teacher_forcing_mask(lay, window=cfg.local_attn_frames, device=x.device)
        for block in self.blocks:
            if self.gradient_checkpointing and torch.is_grad_enabled():
                x = checkpoint(block, x, t_mod, freqs, mask, text_tokens, image_tokens, use_reentrant=False)
            else:
                x = block(x, t_mod, freqs, mask, text_tokens, image_tokens)

        video = x[:, lay.noisy_start:lay.action_start]
        video = self.head(video, t_emb[:, lay.noisy_start:lay.action_start].float())
        video_pred = unpatchify(video, grid, self.patch_size)
        action_pred = self.action_decoder(x[:, lay.action_start:lay.state_start], ids)
        return video_pred, action_pred
