"""One SmolVLA layer: VLM text layer i and (where it has one) the action-expert layer paired with it.

The leaf modules are transformers' Llama classes (``LlamaDecoderLayer``: q/k/v/o projections without bias, SwiGLU
MLP, RMSNorm ``w * x / rms(x)``); the attention step between the towers is ours, following lerobot 0.6.1
``policies/smolvla/smolvlm_with_expert.py``:

- **joint** layers concatenate both towers' queries, keys and values ([prefix | suffix]), rotate them with the
  joint positions and run one attention under the block-causal pattern;
- **cross** layers let the VLM attend over the prefix alone, while the expert's queries (positions restarted at
  0) attend to the expert's own ``k_proj`` / ``v_proj`` applied to this layer's VLM keys (already rotated) and
  values; those projections therefore take the VLM's key/value width as input.

A layer is also the natural FSDP unit: every path calls its ``forward``.

Shape legend: B batch, P prefix tokens, S suffix tokens, N query heads, K key/value heads, D head_dim,
W tower width.
"""
# ruff: noqa: N803 - shape-suffixed tensor names (x_BPW) follow the legend above

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from transformers.models.llama.configuration_llama import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

from embodied_models.smolvla.attention import Rope, attend, rotate

__all__ = ["KVCache", "SmolVLALayer", "llama_config"]


def llama_config(*, width: int, mlp_dim: int, num_heads: int, num_kv_heads: int, head_dim: int, vocab_size: int,
                 rms_norm_eps: float, pad_token_id: int | None = None) -> LlamaConfig:
    """A transformers LlamaConfig with SmolLM2's choices (SwiGLU with SiLU, no attention or MLP bias)."""
    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=width, intermediate_size=mlp_dim, num_hidden_layers=1,
        num_attention_heads=num_heads, num_key_value_heads=num_kv_heads, head_dim=head_dim, hidden_act="silu",
        rms_norm_eps=rms_norm_eps, attention_bias=False, mlp_bias=False, attention_dropout=0.0,
        pad_token_id=pad_token_id,
    )


class KVCache(NamedTuple):
    """The VLM's keys (after RoPE) and values of the prefix for one layer: [B, K, P, D] each."""

    key: torch.Tensor
    value: torch.Tensor


def _heads(linear: nn.Linear, x_BLW: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``linear(x)`` split into heads: [B, heads, L, head_dim]."""
    out = linear(x_BLW)
    return out.view(*out.shape[:-1], -1, head_dim).transpose(1, 2)


def _post_attention(layer: LlamaDecoderLayer, x_BLW: torch.Tensor, attn_BLH: torch.Tensor) -> torch.Tensor:
    """o_proj + residual, then the SwiGLU block with its residual."""
    h = x_BLW + layer.self_attn.o_proj(attn_BLH.to(layer.self_attn.o_proj.weight.dtype))
    return h + layer.mlp(layer.post_attention_layernorm(h))


class SmolVLALayer(nn.Module):
    """VLM layer ``index`` (``vlm``) and its expert layer (``expert``, None where the expert has fewer layers).

    Args:
        vlm_config, expert_config: the towers' Llama configs (expert None: the suffix passes through).
        index: the VLM layer index.
        cross: whether the expert cross-attends to the VLM here (a cross layer) instead of attending jointly.
        attn_implementation: ``eager`` or ``sdpa`` (see attention.attend).
    """

    def __init__(self, vlm_config: LlamaConfig, expert_config: LlamaConfig | None, index: int, *, cross: bool,
                 attn_implementation: str) -> None:
        super().__init__()
        self.vlm = LlamaDecoderLayer(vlm_config, index)
        self.expert = LlamaDecoderLayer(expert_config, index) if expert_config is not None else None
        self.cross = cross and self.expert is not None
        self.head_dim = vlm_config.head_dim
        self.attn_implementation = attn_implementation
        if self.cross:
            assert expert_config is not None
            vlm_kv = vlm_config.num_key_value_heads * vlm_config.head_dim
            expert_kv = expert_config.num_key_value_heads * expert_config.head_dim
            attn = self.expert.self_attn
            attn.k_proj = nn.Linear(vlm_kv, expert_kv, bias=expert_config.attention_bias)
            attn.v_proj = nn.Linear(vlm_kv, expert_kv, bias=expert_config.attention_bias)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        return attend(q, k, v, allowed, implementation=self.attn_implementation)

    def forward(
        self,
        prefix_BPW: torch.Tensor | None,
        suffix_BSW: torch.Tensor | None,
        *,
        rope: Rope,
        cross_rope: Rope | None,
        allowed: torch.Tensor,
        past: KVCache | None = None,
        prefix_output: bool = True,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, KVCache | None]:
        """Runs the layer on the prefix (VLM tokens), the suffix (action tokens), or both.

        Args:
            prefix_BPW: images + language + state tokens, or None (denoising from a cache).
            suffix_BSW: action tokens, or None (filling the cache).
            rope: rotation tables of the given tokens, [prefix | suffix] in order.
            cross_rope: tables of the suffix with positions restarted at 0 (needed with a suffix in cross layers).
            allowed: bool [B, queries, keys]; queries are the given tokens, keys are ``past`` then the given tokens.
            past: the prefix's cached keys/values of this layer (denoising).
            prefix_output: False skips the VLM's queries, output projection and MLP (only its keys/values are
                needed: the last layer whose keys/values the expert reads).

        Returns:
            (prefix out or None, suffix out or None, the VLM's keys/values when filling the cache (no suffix), else
            None).
        """
        p_len = prefix_BPW.shape[1] if prefix_BPW is not None else 0
        q_p = k_p = v_p = None
        new_kv = None
        if prefix_BPW is not None:
            attn = self.vlm.self_attn
            h = self.vlm.input_layernorm(prefix_BPW)
            table = rope.narrow(0, p_len)
            k_p = rotate(_heads(attn.k_proj, h, self.head_dim), table)
            v_p = _heads(attn.v_proj, h, self.head_dim)
            q_p = rotate(_heads(attn.q_proj, h, self.head_dim), table) if prefix_output else None
            if suffix_BSW is None:  # filling the cache: contiguous values (no view escapes an FSDP unit)
                new_kv = KVCache(k_p, v_p.contiguous())
        if suffix_BSW is None or self.expert is None:
            prefix_out = None
            if q_p is not None:
                prefix_out = _post_attention(self.vlm, prefix_BPW, self._attend(q_p, k_p, v_p,
                                                                                 allowed[:, :p_len, :p_len]))
            return prefix_out, suffix_BSW, new_kv

        s_len = suffix_BSW.shape[1]
        e_attn = self.expert.self_attn
        h_s = self.expert.input_layernorm(suffix_BSW)
        q_s = _heads(e_attn.q_proj, h_s, self.head_dim)
        if self.cross:
            source = KVCache(k_p, v_p) if k_p is not None and v_p is not None else past
            if source is None or cross_rope is None:
                raise ValueError("a cross layer needs the prefix or its cache, and the suffix's restarted RoPE tables")
            b, _, keys, _ = source.key.shape
            flat_k = source.key.transpose(1, 2).reshape(b, keys, -1)
            flat_v = source.value.transpose(1, 2).reshape(b, keys, -1)
            k_e = _heads(e_attn.k_proj, flat_k.to(e_attn.k_proj.weight.dtype), self.head_dim)
            v_e = _heads(e_attn.v_proj, flat_v.to(e_attn.v_proj.weight.dtype), self.head_dim)
            att_s = self._attend(rotate(q_s, cross_rope), k_e, v_e, allowed[:, -s_len:, :keys])
            prefix_out = None
            if q_p is not None:
                att_p = self._attend(q_p, k_p, v_p, allowed[:, :p_len, :p_len])
                prefix_out = _post_attention(self.vlm, prefix_BPW, att_p)
            return prefix_out, _post_attention(self.expert, suffix_BSW, att_s), new_kv

        table = rope.narrow(p_len, s_len)
        q_s = rotate(q_s, table)
        k_s = rotate(_heads(e_attn.k_proj, h_s, self.head_dim), table)
        v_s = _heads(e_attn.v_proj, h_s, self.head_dim)
        if prefix_BPW is not None:
            keys, values = torch.cat([k_p, k_s], dim=2), torch.cat([v_p, v_s], dim=2)
        elif past is not None:
            keys, values = torch.cat([past.key, k_s], dim=2), torch.cat([past.value, v_s], dim=2)
        else:
            keys, values = k_s, v_s
        if q_p is not None:
            out = self._attend(torch.cat([q_p, q_s], dim=2), keys, values, allowed)
            prefix_out = _post_attention(self.vlm, prefix_BPW, out[:, :p_len])
            att_s = out[:, p_len:]
        else:
            prefix_out = None
            att_s = self._attend(q_s, keys, values, allowed[:, -s_len:])
        return prefix_out, _post_attention(self.expert, suffix_BSW, att_s), new_kv
