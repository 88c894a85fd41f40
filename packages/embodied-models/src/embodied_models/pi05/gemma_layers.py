"""One joint pi0.5 layer: a Gemma layer of the VLM and an adaRMS Gemma layer of the action expert.

The leaf modules (attention projections, GeGLU MLP, RMSNorm) are transformers' Gemma classes; the joint
step (both towers' Q/K/V concatenated into one attention, split back, per-tower output projection and
MLP, gated residuals for the expert) is ours. See openpi ``models_pytorch/gemma_pytorch.py`` and lerobot
``policies/pi05/modeling_pi05.py`` (``compute_layer_complete``) for the reference computation.

Shape legend: B batch, P prefix tokens, S suffix tokens, L = P + S, N query heads, K key/value heads,
D head_dim, W tower width, C adaRMS condition width.
"""
# ruff: noqa: N803, N806 - shape-suffixed tensor names (x_BSW) follow the legend above


from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from transformers.models.gemma.configuration_gemma import GemmaConfig
from transformers.models.gemma.modeling_gemma import GemmaAttention, GemmaMLP, GemmaRMSNorm, rotate_half

from embodied_models.pi05.attention import attend

__all__ = ["AdaRMSNorm", "ExpertLayer", "KVCache", "Pi05Layer", "VlmLayer", "gemma_config"]


def gemma_config(*, width: int, mlp_dim: int, depth: int, num_heads: int, num_kv_heads: int, head_dim: int,
                 vocab_size: int, rms_norm_eps: float, rope_theta: float, attn_implementation: str) -> GemmaConfig:
    """A transformers GemmaConfig with pi0.5's choices (tanh-GELU GeGLU, no attention bias)."""
    config = GemmaConfig(
        vocab_size=vocab_size, hidden_size=width, intermediate_size=mlp_dim, num_hidden_layers=depth,
        num_attention_heads=num_heads, num_key_value_heads=num_kv_heads, head_dim=head_dim,
        hidden_act="gelu_pytorch_tanh", rms_norm_eps=rms_norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        attention_bias=False, attention_dropout=0.0,
    )
    config._attn_implementation = attn_implementation
    return config


def _rope(x_BHLD: torch.Tensor, cos_BLD: torch.Tensor, sin_BLD: torch.Tensor) -> torch.Tensor:
    """Gemma's rotate-half RoPE (transformers' apply_rotary_pos_emb, for one tensor)."""
    return x_BHLD * cos_BLD[:, None] + rotate_half(x_BHLD) * sin_BLD[:, None]


class AdaRMSNorm(nn.Module):
    """Time-conditioned RMSNorm of the action expert (openpi ``adarms``).

    ``(scale, shift, gate) = dense(cond)``; output ``rmsnorm(x) * (1 + scale) + shift`` (no learned
    weight) and ``gate``, which multiplies the branch output in the following residual.
    """

    def __init__(self, dim: int, cond_dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.dense = nn.Linear(cond_dim, 3 * dim)

    def forward(self, x_BSW: torch.Tensor, cond_BC: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns the modulated normalised input and the residual gate, both in ``x``'s dtype."""
        dtype = x_BSW.dtype
        x32 = x_BSW.float()
        # normalise in float32 then round to the input dtype before modulating, as the reference does
        normed = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x_BSW)
        scale, shift, gate = self.dense(cond_BC).unsqueeze(1).chunk(3, dim=-1)
        normed = normed * (1 + scale.float()) + shift.float()
        return normed.to(dtype), gate.to(dtype)


class KVCache(NamedTuple):
    """Keys (after RoPE) and values of the prefix for one layer: [B, K, P, D] each."""

    key: torch.Tensor
    value: torch.Tensor


class VlmLayer(nn.Module):
    """The VLM half of a joint layer: plain Gemma pre-norm layer (key names as in transformers)."""

    def __init__(self, config: GemmaConfig, layer_idx: int) -> None:
        super().__init__()
        self.input_layernorm = GemmaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.self_attn = GemmaAttention(config, layer_idx)
        self.post_attention_layernorm = GemmaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = GemmaMLP(config)

    def pre_attention(self, x: torch.Tensor, cond: torch.Tensor | None) -> tuple[torch.Tensor, None]:
        """Normalised input and no gate (plain residual)."""
        return self.input_layernorm(x), None

    def post_attention(self, x: torch.Tensor, attn_out: torch.Tensor, gate: torch.Tensor | None,
                       cond: torch.Tensor | None) -> torch.Tensor:
        """o_proj + residual, then the MLP block."""
        h = x + self.self_attn.o_proj(attn_out)
        return h + self.mlp(self.post_attention_layernorm(h))


class ExpertLayer(nn.Module):
    """The action-expert half of a joint layer: Gemma layer whose norms are adaRMS and residuals gated."""

    def __init__(self, config: GemmaConfig, layer_idx: int, cond_dim: int) -> None:
        super().__init__()
        self.input_layernorm = AdaRMSNorm(config.hidden_size, cond_dim, eps=config.rms_norm_eps)
        self.self_attn = GemmaAttention(config, layer_idx)
        self.post_attention_layernorm = AdaRMSNorm(config.hidden_size, cond_dim, eps=config.rms_norm_eps)
        self.mlp = GemmaMLP(config)

    def pre_attention(self, x: torch.Tensor, cond: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """adaRMS-normalised input and the gate of the attention residual."""
        return self.input_layernorm(x, cond)

    def post_attention(self, x: torch.Tensor, attn_out: torch.Tensor, gate: torch.Tensor,
                       cond: torch.Tensor) -> torch.Tensor:
        """Gated o_proj residual, then the gated MLP block."""
        h = x + self.self_attn.o_proj(attn_out) * gate
        normed, mlp_gate = self.post_attention_layernorm(h, cond)
        return h + self.mlp(normed) * mlp_gate


class Pi05Layer(nn.Module):
    """Layer ``i`` of both towers; the natural FSDP unit (every path calls this module's forward).

    Either tower's input may be None: prefix only fills the KV cache (sampling), suffix only reads it.
    """

    def __init__(self, vlm_config: GemmaConfig, expert_config: GemmaConfig, layer_idx: int, *,
                 cond_dim: int) -> None:
        super().__init__()
        self.vlm = VlmLayer(vlm_config, layer_idx)
        self.expert = ExpertLayer(expert_config, layer_idx, cond_dim)
        self.head_dim = vlm_config.head_dim
        self.attn_implementation = vlm_config._attn_implementation

    def forward(
        self,
        prefix_BPW: torch.Tensor | None,
        suffix_BSW: torch.Tensor | None,
        *,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attn_bias: torch.Tensor,
        adarms_cond: torch.Tensor | None,
        past: KVCache | None = None,
        prefix_output: bool = True,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, KVCache]:
        """Runs one joint layer.

        Args:
            prefix_BPW: VLM tokens (images + language), or None.
            suffix_BSW: expert tokens (noisy actions), or None.
            position_embeddings: RoPE (cos, sin) of the new tokens, [B, P+S, D] each.
            attn_bias: additive mask [B, 1, queries, keys]; keys are ``past`` then the new tokens.
            adarms_cond: time conditioning [B, C] (needed when the suffix is given).
            past: cached prefix keys/values to prepend to the keys.
            prefix_output: False skips the VLM's o_proj and MLP (the last layer's prefix output reaches
                nothing: the prefix never feeds the suffix after the last attention).

        Returns:
            (prefix out or None, suffix out or None, this call's new keys/values after RoPE).
        """
        parts = [(tower, x) for tower, x in ((self.vlm, prefix_BPW), (self.expert, suffix_BSW)) if x is not None]
        # the last layer's prefix queries feed only the prefix output, which reaches nothing: skip them
        wants_q = [tower is not self.vlm or prefix_output for tower, _ in parts]
        queries, keys, values, gates = [], [], [], []
        cos, sin = position_embeddings
        q_rows = []
        start = 0
        for (tower, x), want in zip(parts, wants_q, strict=True):
            normed, gate = tower.pre_attention(x, adarms_cond)
            gates.append(gate)
            shape = (*x.shape[:-1], -1, self.head_dim)
            attn = tower.self_attn
            if want:
                queries.append(attn.q_proj(normed).view(shape).transpose(1, 2))
                q_rows.append((start, start + x.shape[1]))
            keys.append(attn.k_proj(normed).view(shape).transpose(1, 2))
            values.append(attn.v_proj(normed).view(shape).transpose(1, 2))
            start += x.shape[1]
        k_BKLD = _rope(torch.cat(keys, dim=2), cos, sin)
        v_BKLD = torch.cat(values, dim=2)
        new_kv = KVCache(k_BKLD, v_BKLD)
        if not queries:
            return None, None, new_kv
        q_first, q_last = q_rows[0][0], q_rows[-1][1]  # contiguous: only the leading prefix is ever skipped
        q_BNQD = _rope(torch.cat(queries, dim=2), cos[:, q_first:q_last], sin[:, q_first:q_last])
        if past is not None:
            k_BKLD = torch.cat([past.key, k_BKLD], dim=2)
            v_BKLD = torch.cat([past.value, v_BKLD], dim=2)
        bias = attn_bias[:, :, q_first:q_last]
        out_BQND = attend(q_BNQD, k_BKLD, v_BKLD, bias, scaling=self.head_dim ** -0.5,
                          implementation=self.attn_implementation)
        out_BQH = out_BQND.reshape(*out_BQND.shape[:2], -1)
        outputs: list[torch.Tensor | None] = []
        start = 0
        for (tower, x), gate, want in zip(parts, gates, wants_q, strict=True):
            if not want:
                outputs.append(None)
                continue
            end = start + x.shape[1]
            attn_out = out_BQH[:, start:end].to(tower.self_attn.o_proj.weight.dtype)
            outputs.append(tower.post_attention(x, attn_out, gate, adarms_cond))
            start = end
        prefix_out = outputs.pop(0) if prefix_BPW is not None else None
        suffix_out = outputs.pop(0) if suffix_BSW is not None else None
        return prefix_out, suffix_out, new_kv
