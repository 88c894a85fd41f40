"""SmolVLA: SmolVLM2 prefix [images | language | state], a Llama-style action expert, flow matching.

Port of the computation of lerobot 0.6.1 ``policies/smolvla/modeling_smolvla.py`` (``VLAFlowMatching``) and
``smolvlm_with_expert.py`` (``SmolVLMWithExpertModel``); see README.md. Flow matching runs with t = 1 as noise:
``x_t = t * noise + (1 - t) * actions``, target ``u = noise - actions``; the time enters only through the action
tokens (``action_time_mlp``), there is no adaRMS and no time token.

Shape legend: B batch, C image slots, P prefix tokens, S suffix tokens (= action horizon H), T language tokens,
A max_action_dim, W VLM width, E expert width.
"""
# ruff: noqa: N803, N806 - shape-suffixed tensor names (x_BSE) follow the legend above

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers.models.llama.modeling_llama import LlamaRMSNorm
from transformers.models.smolvlm.configuration_smolvlm import SmolVLMConfig, SmolVLMVisionConfig
from transformers.models.smolvlm.modeling_smolvlm import (
    SmolVLMConnector,
    SmolVLMEncoderLayer,
    SmolVLMVisionTransformer,
)

from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_models.smolvla.attention import Rope, block_mask, position_ids, rope
from embodied_models.smolvla.batch import SmolVLAPreparedBatch
from embodied_models.smolvla.checkpoint import LoadReport, load_smolvla_checkpoint
from embodied_models.smolvla.checks import size_problems
from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig, expert_mlp_dim, expert_width
from embodied_models.smolvla.images import prepare_images
from embodied_models.smolvla.layers import KVCache, SmolVLALayer, llama_config
from embodied_models.vla.flow import PrefixCachedFlow, time_sincos

__all__ = ["SmolVLAModel", "build_model", "time_sincos"]

Prefix = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""(embeddings [B, P, W], validity [B, P], block-start flags [B, P])."""

_VLM_MODULES = ("vision_model", "connector", "embed_tokens", "vlm_norm", "lm_head")
_LORA_TARGETS = ("layers.*.expert.self_attn.q_proj", "layers.*.expert.self_attn.v_proj", "state_proj",
                 "action_in_proj", "action_out_proj", "action_time_mlp_in", "action_time_mlp_out")


class SmolVLAModel(PrefixCachedFlow, EmbodiedModel):
    """The SmolVLA network. ``forward(batch)`` returns the flow-matching loss; ``sample_actions`` infers.

    Args:
        config: network sizes, flow constants and what trains.
        data_config: image resolution, image slots, horizon and the real action width (the loss uses it).
    """

    def __init__(self, config: SmolVLAModelConfig, data_config: SmolVLADataConfig) -> None:
        super().__init__()
        problems = size_problems(config, data_config) + config.validate()
        if problems:
            raise ValueError("SmolVLA sizes: " + "; ".join(problems))
        self.config = config
        self.image_size = tuple(data_config.image_size)
        self.action_horizon = data_config.action_horizon
        self.real_action_dim = data_config.action_dim or config.max_action_dim
        width, e_width = config.vlm_width, expert_width(config)
        self.expert_width = e_width
        common = dict(num_heads=config.num_heads, num_kv_heads=config.num_kv_heads, head_dim=config.head_dim,
                      vocab_size=config.vocab_size, rms_norm_eps=config.rms_norm_eps)
        vlm_cfg = llama_config(width=width, mlp_dim=config.vlm_mlp_dim, pad_token_id=config.pad_token_id, **common)
        expert_cfg = llama_config(width=e_width, mlp_dim=expert_mlp_dim(e_width), **common)
        vision_cfg = SmolVLMVisionConfig(
            hidden_size=config.vision_width, intermediate_size=config.vision_mlp_dim,
            num_hidden_layers=config.vision_depth, num_attention_heads=config.vision_num_heads, num_channels=3,
            image_size=self.image_size[0], patch_size=config.vision_patch_size, hidden_act="gelu_pytorch_tanh",
            layer_norm_eps=config.layer_norm_eps, attention_dropout=0.0,
        )
        vlm_config = SmolVLMConfig(vision_config=vision_cfg, text_config=vlm_cfg, scale_factor=config.scale_factor)
        # the vision encoder runs transformers' SDPA kernel, as lerobot's SmolVLMForConditionalGeneration does by
        # default (eager there differs by ~1e-6); set after the parent config, whose init resets its sub-configs
        vision_cfg._attn_implementation = "sdpa"
        self.vision_model = SmolVLMVisionTransformer(vision_cfg)
        self.connector = SmolVLMConnector(vlm_config)
        self.embed_tokens = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        stride = config.expert_layer_stride()
        self.layers = nn.ModuleList(
            SmolVLALayer(vlm_cfg, expert_cfg if i % stride == 0 else None, i, cross=config.is_cross_layer(i),
                         attn_implementation=config.attn_implementation)
            for i in range(config.num_vlm_layers))
        self.last_expert_layer = max(i for i in range(config.num_vlm_layers) if i % stride == 0)
        self.vlm_norm = LlamaRMSNorm(width, eps=config.rms_norm_eps)
        self.expert_norm = LlamaRMSNorm(e_width, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(width, config.vocab_size, bias=False) if config.keep_lm_head else None
        self.state_proj = nn.Linear(config.max_state_dim, width)
        self.action_in_proj = nn.Linear(config.max_action_dim, e_width)
        self.action_out_proj = nn.Linear(e_width, config.max_action_dim)
        self.action_time_mlp_in = nn.Linear(2 * e_width, e_width)
        self.action_time_mlp_out = nn.Linear(e_width, e_width)
        self._set_trainable()

    def _set_trainable(self) -> None:
        """lerobot's fine-tuning choices, plus parameters no loss can reach kept with requires_grad=False.

        The prefix stream feeds the actions only through the keys/values of layers that have an expert layer, so
        after the last such layer nothing of the VLM reaches the loss: its queries, output projection and MLP, every
        later VLM layer, the final VLM norm and the language head stay in checkpoints but get no gradient (DDP then
        needs no find_unused_parameters and the optimizer keeps no state for them).
        """
        cfg = self.config
        unreachable: list[nn.Module] = [self.vlm_norm]
        if self.lm_head is not None:
            unreachable.append(self.lm_head)
        last = self.layers[self.last_expert_layer].vlm
        unreachable += [last.self_attn.q_proj, last.self_attn.o_proj, last.post_attention_layernorm, last.mlp]
        unreachable += [layer.vlm for layer in self.layers[self.last_expert_layer + 1:]]
        if cfg.freeze_vision_encoder:
            unreachable.append(self.vision_model)
        if cfg.train_expert_only:
            unreachable += [getattr(self, name) for name in _VLM_MODULES if getattr(self, name) is not None]
            unreachable += [layer.vlm for layer in self.layers]
        for module in unreachable:
            module.requires_grad_(False)
        self.state_proj.requires_grad_(cfg.train_state_proj)

    # ------------------------------------------------------------------ interface
    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """Module classes that are natural FSDP units: joint layers and vision encoder layers."""
        return (SmolVLALayer, SmolVLMEncoderLayer)

    def no_weight_decay(self) -> frozenset[str]:
        """Trainable parameter names exempt from weight decay: biases, norm scales, position/token embeddings."""
        return frozenset(name for name, param in self.named_parameters() if param.requires_grad and (
            param.ndim < 2 or "norm" in name or "embedding" in name or name == "embed_tokens.weight"))

    def default_lora_targets(self) -> tuple[str, ...]:
        """lerobot's default PEFT targets for SmolVLA: the expert's query/value projections in every layer and the
        state, action and time projections (see README.md)."""
        return _LORA_TARGETS

    def load_pretrained_checkpoint(self, path: str | Path, **allow: Any) -> LoadReport:
        """Loads a lerobot SmolVLA / own-layout checkpoint through the declared key map (strict).

        ``allow`` takes checkpoint.load_smolvla_checkpoint's allow_missing/allow_unexpected/allow_mismatched.
        """
        return load_smolvla_checkpoint(self, path, **allow)

    # ------------------------------------------------------------------ embeddings
    def embed_images(self, images_BC3HW: torch.Tensor) -> torch.Tensor:
        """Images [B, C, 3, H, W] in [-1, 1] -> vision encoder + connector tokens [B, C, N, W] (before scaling)."""
        b, c = images_BC3HW.shape[:2]
        flat = images_BC3HW.flatten(0, 1).to(self.vision_model.embeddings.patch_embedding.weight.dtype)
        hidden = self.vision_model(pixel_values=flat).last_hidden_state
        return self.connector(hidden).unflatten(0, (b, c))

    def _special_tokens(self, ids: list[int], batch: int, device: torch.device) -> torch.Tensor:
        emb = self.embed_tokens(torch.tensor(ids, dtype=torch.long, device=device))
        return emb[None].expand(batch, -1, -1)

    def embed_prefix(self, batch: SmolVLAPreparedBatch) -> Prefix:
        """[images of every slot (x sqrt(W)) | language (x sqrt(W)) | state token].

        Returns embeddings [B, P, W], validity [B, P] (camera masks, language mask) and block-start flags [B, P]
        (0 for images and language, 1 for the state token); with ``model.prefix_length`` > P, invalid zero tokens
        (flag 0) follow up to that length.
        """
        images = prepare_images(batch.images, self.image_size)
        img_BCNW = self.embed_images(images)
        b, c, n, w = img_BCNW.shape
        img_BCNW = img_BCNW * torch.tensor(w ** 0.5, dtype=img_BCNW.dtype, device=img_BCNW.device)
        img_pad = batch.image_masks[:, :, None].expand(b, c, n)
        if self.config.add_image_special_tokens:
            cfg = self.config
            start = self._special_tokens([cfg.fake_image_token_id, cfg.global_image_token_id], b, img_BCNW.device)
            end = self._special_tokens([cfg.fake_image_token_id], b, img_BCNW.device)
            img_BCNW = torch.cat([start[:, None].expand(b, c, -1, -1).to(img_BCNW.dtype), img_BCNW,
                                  end[:, None].expand(b, c, -1, -1).to(img_BCNW.dtype)], dim=2)
            ones = torch.ones(b, c, 1, dtype=torch.bool, device=img_pad.device)
            img_pad = torch.cat([ones, ones, img_pad, ones], dim=2)
        lang_BTW = self.embed_tokens(batch.tokens) * math.sqrt(w)
        state_B1W = self.state_proj(batch.state.to(self.state_proj.weight.dtype))[:, None]
        dtype = lang_BTW.dtype
        embs = torch.cat([img_BCNW.reshape(b, -1, w).to(dtype), lang_BTW, state_B1W.to(dtype)], dim=1)
        pad = torch.cat([img_pad.reshape(b, -1), batch.token_mask.bool(),
                         torch.ones(b, 1, dtype=torch.bool, device=img_pad.device)], dim=1)
        flags = torch.zeros_like(pad, dtype=torch.long)
        flags[:, -1] = 1
        missing = self.config.prefix_length - embs.shape[1]
        if missing > 0:  # lerobot's prefix_length: invalid zero tokens after the state, in the state's block
            embs = torch.cat([embs, embs.new_zeros(b, missing, w)], dim=1)
            pad = torch.cat([pad, pad.new_zeros(b, missing)], dim=1)
            flags = torch.cat([flags, flags.new_zeros(b, missing)], dim=1)
        return embs, pad, flags

    def embed_suffix(self, x_t_BSA: torch.Tensor, time_B: torch.Tensor) -> torch.Tensor:
        """Action tokens ``mlp_out(silu(mlp_in([action_in_proj(x_t) | sincos(t)])))`` [B, S, E]."""
        action_BSE = self.action_in_proj(x_t_BSA.to(self.action_in_proj.weight.dtype))
        sincos = time_sincos(time_B, self.expert_width, min_period=self.config.min_period,
                             max_period=self.config.max_period).to(action_BSE.dtype)
        fused = torch.cat([action_BSE, sincos[:, None].expand_as(action_BSE)], dim=2)
        return self.action_time_mlp_out(F.silu(self.action_time_mlp_in(fused)))

    # ------------------------------------------------------------------ towers
    def _layer(self, layer: SmolVLALayer, *args: Any, **kwargs: Any) -> tuple[Any, Any, Any]:
        if self.config.gradient_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(layer, *args, use_reentrant=False, **kwargs)
        return layer(*args, **kwargs)

    def _tables(self, pos_BL: torch.Tensor) -> Rope:
        return rope(pos_BL, self.config.head_dim, self.config.rope_theta)

    def _velocity(self, suffix_out_BSE: torch.Tensor) -> torch.Tensor:
        out = self.expert_norm(suffix_out_BSE)[:, -self.action_horizon:]
        return self.action_out_proj(out.float()).float()

    def velocity(self, prefix: Prefix, x_t_BSA: torch.Tensor, time_B: torch.Tensor) -> torch.Tensor:
        """Joint forward of prefix and noisy actions (training path); the predicted velocity [B, S, A] (float32)."""
        prefix_embs, prefix_pad, prefix_flags = prefix
        suffix = self.embed_suffix(x_t_BSA, time_B)
        b, s = suffix.shape[:2]
        ones = torch.ones(b, s, dtype=torch.bool, device=suffix.device)
        pad = torch.cat([prefix_pad, ones], dim=1)
        allowed = block_mask(pad, torch.cat([prefix_flags, ones.long()], dim=1))
        pos = position_ids(pad)
        suffix_pos = pos[:, -s:]
        tables = self._tables(pos)
        cross = self._tables(suffix_pos - suffix_pos.min(dim=1, keepdim=True).values)
        h_p, h_s = prefix_embs, suffix
        for i in range(self.last_expert_layer + 1):
            h_p, h_s, _ = self._layer(self.layers[i], h_p, h_s, rope=tables, cross_rope=cross, allowed=allowed,
                                      prefix_output=i < self.last_expert_layer)
        return self._velocity(h_s)

    @torch.no_grad()
    def prefix_features(self, batch: SmolVLAPreparedBatch) -> torch.Tensor:
        """The VLM's output over the prefix after every kept layer and the final norm [B, P, W] (feeds no loss; the
        actions read only the layers' keys/values)."""
        embs, pad, flags = self.embed_prefix(batch)
        allowed = block_mask(pad, flags)
        tables = self._tables(position_ids(pad))
        h = embs
        for layer in self.layers:
            h, _, _ = layer(h, None, rope=tables, cross_rope=None, allowed=allowed)
        return self.vlm_norm(h)

    # ------------------------------------------------------------------ training
    def sample_noise_and_time(self, actions_BSA: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Standard-normal noise like the actions and t ~ Beta(alpha, beta) * scale + offset per sample."""
        cfg = self.config
        noise = torch.randn(actions_BSA.shape, dtype=torch.float32, device=actions_BSA.device)
        beta = torch.distributions.Beta(torch.tensor(cfg.time_beta_alpha), torch.tensor(cfg.time_beta_beta))
        time = beta.sample((actions_BSA.shape[0],)).to(actions_BSA.device)
        return noise, (time * cfg.time_scale + cfg.time_offset).to(torch.float32)

    def reduce_loss(self, elements: torch.Tensor, action_is_pad: torch.Tensor | None) -> torch.Tensor:
        """lerobot's SmolVLAPolicy reduction: the real action dims, padded horizon steps zeroed, the sum divided by
        (valid steps x real dims)."""
        elements = elements[..., : self.real_action_dim]
        if action_is_pad is None:
            return elements.mean()
        valid = ~action_is_pad.bool()
        total = (elements * valid[:, :, None].to(elements.dtype)).sum()
        return total / (valid.sum() * elements.shape[-1]).clamp_min(1)

    def forward(self, batch: SmolVLAPreparedBatch) -> ModelOutput:
        """Training loss of a batch (see reduce_loss)."""
        return ModelOutput(loss=self.reduce_loss(self.loss_elements(batch), batch.action_is_pad), metrics={})

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def fill_prefix_cache(self, batch: SmolVLAPreparedBatch) -> tuple[list[KVCache], torch.Tensor]:
        """Runs the prefix through the VLM once (every layer attends over the prefix alone); returns each layer's
        keys (after RoPE) and values up to the last layer an expert reads, and the prefix validity."""
        embs, pad, flags = self.embed_prefix(batch)
        allowed = block_mask(pad, flags)
        tables = self._tables(position_ids(pad))
        cache: list[KVCache] = []
        h: torch.Tensor | None = embs
        for i in range(self.last_expert_layer + 1):
            h, _, kv = self.layers[i](h, None, rope=tables, cross_rope=None, allowed=allowed,
                                      prefix_output=i < self.last_expert_layer)
            assert kv is not None
            cache.append(kv)
        return cache, pad

    @torch.no_grad()
    def cached_velocity(self, cache: list[KVCache], prefix_pad: torch.Tensor, x_t_BSA: torch.Tensor,
                        time_B: torch.Tensor) -> torch.Tensor:
        """The velocity of noisy actions [B, S, A] with the expert alone, reading the prefix cache."""
        suffix = self.embed_suffix(x_t_BSA, time_B)
        b, s = suffix.shape[:2]
        ones = torch.ones(b, s, dtype=torch.bool, device=suffix.device)
        allowed = torch.cat([prefix_pad[:, None, :].expand(b, s, -1), block_mask(ones, ones)], dim=2)
        pos = prefix_pad.long().sum(dim=1, keepdim=True) + position_ids(ones)
        tables = self._tables(pos)
        cross = self._tables(pos - pos.min(dim=1, keepdim=True).values)
        h: torch.Tensor | None = suffix
        for i in range(self.last_expert_layer + 1):
            _, h, _ = self.layers[i](None, h, rope=tables, cross_rope=cross, allowed=allowed, past=cache[i])
        assert h is not None
        return self._velocity(h)


def build_model(model_config: SmolVLAModelConfig, data_config: SmolVLADataConfig) -> SmolVLAModel:
    """Model factory of the ``smolvla`` / ``smolvla_tiny`` plugins (random init; see checkpoint.py to load)."""
    return SmolVLAModel(model_config, data_config)
