"""diffusers' ``Cosmos3OmniTransformer`` built from our config, run on a padded batch of packed sequences.

diffusers' forward packs one sequence (its attention has no notion of samples): the understanding (text) tokens
attend causally, the generation (vision + action) tokens attend to every token. Training needs many samples per
step, so this module keeps diffusers' modules and weights and runs its decoder layers (``layer(und, gen, rope)``,
so FSDP's per-layer hooks and activation checkpointing see the layers) on ``[B, L, hidden]`` tensors, with
:class:`BatchedMoTAttnProcessor` installed in every layer's attention: the same projections, norms and rotary
embedding, then one ``scaled_dot_product_attention`` per pathway with a per-sample mask (causal over the
sample's own text for the understanding pathway, all of the sample's valid tokens for the generation pathway).
Embedding (tokens, latent patches, domain-aware action projection, timestep embedding on the noisy tokens),
the mRoPE tables and the output heads are called here, as diffusers' forward does for one sample.
"""

from __future__ import annotations

import attrs
import torch
import torch.nn.functional as F
from torch import nn

from embodied_models.cosmos3.config import Cosmos3ModelConfig

__all__ = ["BatchedMoTAttnProcessor", "GenInputs", "NetInputs", "build_transformer", "patchify", "run_network",
           "unpatchify"]


def build_transformer(config: Cosmos3ModelConfig) -> nn.Module:
    """``Cosmos3OmniTransformer`` with action generation, from the config (random weights; no download)."""
    from diffusers import Cosmos3OmniTransformer

    net = Cosmos3OmniTransformer(
        head_dim=config.head_dim, hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
        base_fps=config.base_fps, enable_fps_modulation=config.enable_fps_modulation,
        latent_channel=config.latent_channel, unified_3d_mrope_reset_spatial_ids=config.mrope_reset_spatial_ids,
        unified_3d_mrope_temporal_modality_margin=config.mrope_temporal_modality_margin,
        latent_patch_size=config.latent_patch_size, num_attention_heads=config.num_attention_heads,
        num_hidden_layers=config.num_hidden_layers, num_key_value_heads=config.num_key_value_heads,
        patch_latent_dim=config.latent_patch_size ** 2 * config.latent_channel, rms_norm_eps=config.rms_norm_eps,
        rope_theta=config.rope_theta, action_dim=config.max_action_dim, action_gen=True,
        num_embodiment_domains=config.num_embodiment_domains, timestep_scale=config.timestep_scale,
        vocab_size=config.vocab_size, qk_norm_for_text=config.qk_norm_for_text,
        rope_axes_dim=list(config.rope_axes_dim),
    )
    processor = BatchedMoTAttnProcessor()
    for layer in net.layers:
        layer.self_attn.set_processor(processor)
    return net


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, L, heads, d]; cos/sin [B, L, d]."""
    return x * cos.unsqueeze(2) + _rotate_half(x) * sin.unsqueeze(2)


class BatchedMoTAttnProcessor:
    """Cosmos3's dual-pathway attention on ``[B, L, hidden]`` with per-sample masks.

    ``rotary_emb`` is ``(cos_und, sin_und, cos_gen, sin_gen, und_mask, gen_mask)``: the rotary tables
    ``[B, L, head_dim]`` of each pathway and boolean masks ``[B, 1, Lu, Lu]`` (understanding queries over
    understanding keys) and ``[B, 1, Lg, Lu + Lg]`` (generation queries over understanding then generation keys).
    """

    def __call__(self, attn: nn.Module, und_seq: torch.Tensor, gen_seq: torch.Tensor,
                 rotary_emb: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        cos_u, sin_u, cos_g, sin_g, und_mask, gen_mask = rotary_emb
        b, lu, _ = und_seq.shape
        lg = gen_seq.shape[1]
        nq, nkv, d = attn.num_attention_heads, attn.num_key_value_heads, attn.head_dim
        q_u = attn.norm_q(attn.to_q(und_seq).view(b, lu, nq, d))
        k_u = attn.norm_k(attn.to_k(und_seq).view(b, lu, nkv, d))
        v_u = attn.to_v(und_seq).view(b, lu, nkv, d)
        k_u_gen = attn.k_norm_und_for_gen(k_u) if attn.k_norm_und_for_gen is not None else k_u
        q_g = attn.norm_added_q(attn.add_q_proj(gen_seq).view(b, lg, nq, d))
        k_g = attn.norm_added_k(attn.add_k_proj(gen_seq).view(b, lg, nkv, d))
        v_g = attn.add_v_proj(gen_seq).view(b, lg, nkv, d)
        q_u, k_u, k_u_gen = _rope(q_u, cos_u, sin_u), _rope(k_u, cos_u, sin_u), _rope(k_u_gen, cos_u, sin_u)
        q_g, k_g = _rope(q_g, cos_g, sin_g), _rope(k_g, cos_g, sin_g)
        und = F.scaled_dot_product_attention(q_u.transpose(1, 2), k_u.transpose(1, 2), v_u.transpose(1, 2),
                                             attn_mask=und_mask, enable_gqa=True)
        keys = torch.cat([k_u_gen, k_g], dim=1).transpose(1, 2)
        values = torch.cat([v_u, v_g], dim=1).transpose(1, 2)
        gen = F.scaled_dot_product_attention(q_g.transpose(1, 2), keys, values, attn_mask=gen_mask, enable_gqa=True)
        und = attn.to_out(und.transpose(1, 2).reshape(b, lu, nq * d))
        gen = attn.to_add_out(gen.transpose(1, 2).reshape(b, lg, nq * d))
        return und, gen


def patchify(latent: torch.Tensor, p: int) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """``[C, T, H, W]`` -> tokens ``[T * h * w, p * p * C]`` (H, W zero-padded to multiples of p) and (T, h, w)."""
    c, t, h, w = latent.shape
    hp, wp = -(-h // p), -(-w // p)
    if (hp * p, wp * p) != (h, w):
        latent = F.pad(latent, (0, wp * p - w, 0, hp * p - h))
    tokens = latent.reshape(c, t, hp, p, wp, p).permute(1, 2, 4, 3, 5, 0).reshape(t * hp * wp, p * p * c)
    return tokens, (t, hp, wp)


def unpatchify(tokens: torch.Tensor, grid: tuple[int, int, int], hw: tuple[int, int], p: int) -> torch.Tensor:
    """Inverse of :func:`patchify`: ``[T * h * w, p * p * C]`` -> ``[C, T, H, W]`` cropped to ``hw``."""
    t, hp, wp = grid
    c = tokens.shape[-1] // (p * p)
    latent = tokens.reshape(t, hp, wp, p, p, c).permute(5, 0, 1, 3, 2, 4).reshape(c, t, hp * p, wp * p)
    return latent[:, :, : hw[0], : hw[1]]


@attrs.define
class GenInputs:
    """One sample's generation tokens: noised latent ``[C, T, H, W]``, noised actions ``[Ta, D]``, which latent
    frames / action rows are noisy, the flow timestep (0..1000) and the embodiment domain."""

    latent: torch.Tensor
    actions: torch.Tensor
    noisy_frames: torch.Tensor  # bool [T]
    noisy_rows: torch.Tensor  # bool [Ta]
    timestep: torch.Tensor  # [] float
    domain_id: torch.Tensor  # [] long


@attrs.define
class NetInputs:
    """The padded batch of packed sequences (see :mod:`embodied_models.cosmos3.packing`)."""

    text_ids: torch.Tensor  # long [B, Lu] (right-padded with 0)
    und_valid: torch.Tensor  # bool [B, Lu]
    gen_valid: torch.Tensor  # bool [B, Lg]
    position_ids: torch.Tensor  # [3, B, Lu + Lg]
    gen: list[GenInputs]


def _masks(und_valid: torch.Tensor, gen_valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lu = und_valid.shape[1]
    causal = torch.ones(lu, lu, dtype=torch.bool, device=und_valid.device).tril()
    und_mask = causal[None] & und_valid[:, None, :]
    keys = torch.cat([und_valid, gen_valid], dim=1)
    gen_mask = keys[:, None, :].expand(-1, gen_valid.shape[1], -1)
    return und_mask[:, None], gen_mask[:, None]


def _time_embeds(net: nn.Module, timesteps: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[B] timesteps (0..1000) -> [B, hidden]; the MLP runs in its own precision, outside autocast."""
    param = next(net.time_embedder.parameters())
    with torch.autocast(device_type=timesteps.device.type, enabled=False):
        freq = net.time_proj(timesteps * net.config.timestep_scale).to(param.dtype)
        return net.time_embedder(freq).to(dtype)


def run_network(net: nn.Module, inputs: NetInputs) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Velocity predictions per sample: latents ``[C, T, H, W]`` and actions ``[Ta, D]``, zero at clean positions."""
    p = net.config.latent_patch_size
    und = net.embed_tokens(inputs.text_ids)
    dtype = und.dtype
    device = und.device
    timesteps = torch.stack([g.timestep for g in inputs.gen]).to(device=device, dtype=torch.float32)
    temb = _time_embeds(net, timesteps, dtype)  # [B, hidden]
    rows, grids = [], []
    for i, g in enumerate(inputs.gen):
        tokens, grid = patchify(g.latent.to(device=device, dtype=dtype), p)
        vision = net.proj_in(tokens)
        vision = vision + g.noisy_frames.to(device).repeat_interleave(grid[1] * grid[2])[:, None].to(dtype) * temb[i]
        domain = g.domain_id.to(device=device, dtype=torch.long).reshape(1)
        action = net.action_proj_in(g.actions.to(device=device, dtype=dtype)[None], domain)[0]
        action = action + net.action_modality_embed
        action = action + g.noisy_rows.to(device)[:, None].to(dtype) * temb[i]
        rows.append(torch.cat([vision, action], dim=0))
        grids.append(grid)
    lg = inputs.gen_valid.shape[1]
    gen = torch.stack([F.pad(r, (0, 0, 0, lg - r.shape[0])) for r in rows])
    lu = und.shape[1]
    cos, sin = net.rotary_emb(position_ids=inputs.position_ids.to(device), device=device, dtype=dtype)
    und_mask, gen_mask = _masks(inputs.und_valid.to(device), inputs.gen_valid.to(device))
    rotary = (cos[:, :lu], sin[:, :lu], cos[:, lu:], sin[:, lu:], und_mask, gen_mask)
    for layer in net.layers:
        und, gen = layer(und, gen, rotary)
    gen = net.norm_moe_gen(gen)
    latents, actions = [], []
    for i, (g, grid) in enumerate(zip(inputs.gen, grids, strict=True)):
        n_vision = grid[0] * grid[1] * grid[2]
        pred = unpatchify(net.proj_out(gen[i, :n_vision]), grid, tuple(g.latent.shape[2:]), p)
        latents.append(pred * g.noisy_frames.to(device)[None, :, None, None].to(pred.dtype))
        domain = g.domain_id.to(device=device, dtype=torch.long).reshape(1)
        hidden = gen[i, n_vision:n_vision + g.actions.shape[0]]
        pred_a = net.action_proj_out(hidden[None], domain)[0]
        actions.append(pred_a * g.noisy_rows.to(device)[:, None].to(pred_a.dtype))
    return latents, actions
