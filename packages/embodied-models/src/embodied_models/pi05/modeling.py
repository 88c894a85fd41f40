"""pi0.5: PaliGemma (SigLIP + Gemma) prefix, adaRMS Gemma action expert, flow matching.

Port of the computation of openpi ``models_pytorch/pi0_pytorch.py`` (``PI0Pytorch`` with ``pi05=True``)
and lerobot ``policies/pi05/modeling_pi05.py`` (``PI05Pytorch``); see README.md. Flow matching runs with
t = 1 as noise: ``x_t = t * noise + (1 - t) * actions``, target ``u = noise - actions``.

Shape legend: B batch, C cameras, P prefix tokens, S suffix tokens (= action horizon H), T language
tokens, A max_action_dim, W tower width.
"""
# ruff: noqa: N803, N806 - shape-suffixed tensor names (x_BSW) follow the legend above


from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.gemma.modeling_gemma import GemmaRMSNorm, GemmaRotaryEmbedding, GemmaTextScaledWordEmbedding
from transformers.models.siglip.configuration_siglip import SiglipVisionConfig
from transformers.models.siglip.modeling_siglip import SiglipEncoderLayer, SiglipVisionModel

from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_core.trainer.activation_checkpoint import set_activation_checkpointing
from embodied_models.pi05.attention import attention_bias, block_mask, position_ids
from embodied_models.pi05.batch import Pi05PreparedBatch
from embodied_models.pi05.checkpoint import LoadReport, load_pi05_checkpoint
from embodied_models.pi05.checks import size_problems
from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig
from embodied_models.pi05.gemma_layers import AdaRMSNorm, KVCache, Pi05Layer, gemma_config
from embodied_models.vla import flow
from embodied_models.vla.flow import PrefixCachedFlow

__all__ = ["Pi05Model", "build_model", "time_sincos"]

_LORA_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                     "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def time_sincos(time_B: torch.Tensor, width: int, *, min_period: float, max_period: float) -> torch.Tensor:
    """Sin-cos embedding of the flow time ([sin | cos], periods geometric in [min, max]); float64 math, returned
    in ``time_B``'s dtype (openpi casts there before the time MLP's own cast)."""
    return flow.time_sincos(time_B, width, min_period=min_period, max_period=max_period).to(time_B.dtype)


class Pi05Model(PrefixCachedFlow, EmbodiedModel):
    """The pi0.5 network. ``forward(batch)`` returns the flow-matching loss; ``sample_actions`` infers.

    Args:
        config: network sizes and flow constants.
        data_config: image resolution and the real action width (the loss averages over it).
    """

    def __init__(self, config: Pi05ModelConfig, data_config: Pi05DataConfig) -> None:
        super().__init__()
        problems = size_problems(config, data_config)
        if problems:
            raise ValueError("pi0.5 sizes: " + "; ".join(problems))
        self.config = config
        self.action_horizon = data_config.action_horizon
        self.real_action_dim = data_config.action_dim
        common = dict(depth=config.depth, num_heads=config.num_heads, num_kv_heads=config.num_kv_heads,
                      head_dim=config.head_dim, vocab_size=config.vocab_size, rms_norm_eps=config.rms_norm_eps,
                      rope_theta=config.rope_theta, attn_implementation=config.attn_implementation)
        vlm_cfg = gemma_config(width=config.vlm_width, mlp_dim=config.vlm_mlp_dim, **common)
        expert_cfg = gemma_config(width=config.expert_width, mlp_dim=config.expert_mlp_dim, **common)
        vision_cfg = SiglipVisionConfig(
            hidden_size=config.vision_width, intermediate_size=config.vision_mlp_dim,
            num_hidden_layers=config.vision_depth, num_attention_heads=config.vision_num_heads,
            num_channels=3, image_size=data_config.image_size[0], patch_size=config.vision_patch_size,
            hidden_act="gelu_pytorch_tanh", layer_norm_eps=config.layer_norm_eps, vision_use_head=False,
        )
        vision_cfg._attn_implementation = config.attn_implementation
        self.vision_tower = SiglipVisionModel(vision_cfg)
        self.multi_modal_projector = nn.Linear(config.vision_width, config.vlm_width)
        # Gemma scales token embeddings by sqrt(width) inside this module (openpi multiplies by hand)
        self.embed_tokens = GemmaTextScaledWordEmbedding(config.vocab_size, config.vlm_width, padding_idx=0,
                                                         embed_scale=config.vlm_width ** 0.5)
        self.rotary_emb = GemmaRotaryEmbedding(vlm_cfg)
        self.layers = nn.ModuleList(Pi05Layer(vlm_cfg, expert_cfg, i, cond_dim=config.expert_width)
                                    for i in range(config.depth))
        self.vlm_norm = GemmaRMSNorm(config.vlm_width, eps=config.rms_norm_eps)
        self.expert_norm = AdaRMSNorm(config.expert_width, config.expert_width, eps=config.rms_norm_eps)
        self.action_in_proj = nn.Linear(config.max_action_dim, config.expert_width)
        self.action_out_proj = nn.Linear(config.expert_width, config.max_action_dim)
        self.time_mlp_in = nn.Linear(config.expert_width, config.expert_width)
        self.time_mlp_out = nn.Linear(config.expert_width, config.expert_width)
        self._freeze_unreachable()
        for layer in self.layers:  # core's non-reentrant checkpointing (one mechanism with the trainer's flags)
            set_activation_checkpointing(layer, config.gradient_checkpointing)

    def _freeze_unreachable(self) -> None:
        """Parameters no loss can reach stay in the checkpoint but get requires_grad=False.

        After the last joint attention the prefix stream feeds nothing (the actions read only its keys and
        values), so the last VLM layer's q_proj/o_proj/MLP/post-norm and the final VLM norm never get gradients
        (the layer skips computing them);
        freezing them keeps DDP from waiting for their gradients and the optimizer from holding state.
        """
        last = self.layers[-1].vlm
        for module in (last.self_attn.q_proj, last.self_attn.o_proj, last.post_attention_layernorm, last.mlp,
                       self.vlm_norm):
            module.requires_grad_(False)

    # ------------------------------------------------------------------ interface
    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """Module classes that are natural FSDP units: joint layers and SigLIP encoder layers."""
        return (Pi05Layer, SiglipEncoderLayer)

    def no_weight_decay(self) -> frozenset[str]:
        """Trainable parameter names exempt from weight decay: biases, norm scales, position/token embeddings."""
        return frozenset(name for name, param in self.named_parameters() if param.requires_grad and (
            param.ndim < 2 or "norm" in name or "embedding" in name or name == "embed_tokens.weight"))

    def default_lora_targets(self) -> tuple[str, ...]:
        """The attention and MLP projections of every joint layer, in both towers (PaliGemma's Gemma ``vlm``
        and the action ``expert``), as openpi's LoRA variants adapt them; the SigLIP tower and the small
        action/time projections stay as they are (see README.md)."""
        return tuple(f"layers.*.{proj}" for proj in _LORA_PROJECTIONS)

    def load_pretrained_checkpoint(self, path: str | Path, **allow: Any) -> LoadReport:
        """Loads a lerobot / openpi-PyTorch / own-layout checkpoint through the declared key map (strict).

        ``allow`` takes checkpoint.load_pi05_checkpoint's allow_missing/allow_unexpected/allow_mismatched.
        """
        return load_pi05_checkpoint(self, path, **allow)

    @torch.no_grad()
    def init_module_weights(self, module: nn.Module) -> None:
        """Initializes ``module`` as building does (``--init-on-meta``): the SigLIP tower through transformers'
        own ``_init_weights``, Gemma norms at zero (they scale by ``1 + weight``), RoPE frequencies and the
        embedding scale recomputed, every other layer by its ``reset_parameters``."""
        if module in self._vision_modules:
            self.vision_tower._init_weights(module)
        elif isinstance(module, GemmaRMSNorm):
            module.weight.zero_()
        elif isinstance(module, GemmaRotaryEmbedding):
            inv_freq, _ = module.compute_default_rope_parameters(module.config)
            module.inv_freq.copy_(inv_freq)
            module.original_inv_freq.copy_(inv_freq)
        else:
            super().init_module_weights(module)
            if isinstance(module, GemmaTextScaledWordEmbedding):
                module.embed_scale.fill_(module.scalar_embed_scale)

    @functools.cached_property
    def _vision_modules(self) -> frozenset[nn.Module]:
        return frozenset(self.vision_tower.modules())

    @torch.no_grad()
    def init_non_persistent_buffers(self) -> None:
        """Recomputes buffers that are not in the state dict (after building on the meta device + to_empty)."""
        inv_freq, _ = self.rotary_emb.compute_default_rope_parameters(self.rotary_emb.config)
        self.rotary_emb.inv_freq.copy_(inv_freq)
        self.rotary_emb.original_inv_freq.copy_(inv_freq)
        emb = self.vision_tower.embeddings
        emb.position_ids.copy_(torch.arange(emb.num_positions).expand((1, -1)))
        self.embed_tokens.embed_scale.fill_(self.embed_tokens.scalar_embed_scale)

    # ------------------------------------------------------------------ embeddings
    def embed_images(self, images_BCHWx: torch.Tensor) -> torch.Tensor:
        """Images [B, C, 3, H, W] (uint8, or float in [-1, 1]) -> tokens [B, C, tokens_per_image, W]."""
        if images_BCHWx.dtype == torch.uint8:
            images_BCHWx = images_BCHWx.to(torch.float32) / 255.0 * 2.0 - 1.0
        b, c = images_BCHWx.shape[:2]
        flat = images_BCHWx.flatten(0, 1).to(self.multi_modal_projector.weight.dtype)
        feats = self.vision_tower(pixel_values=flat).last_hidden_state
        tokens = self.multi_modal_projector(feats)
        return tokens.unflatten(0, (b, c))

    def embed_prefix(self, batch: Pi05PreparedBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Image tokens of every camera, then language tokens.

        Returns:
            embeddings [B, P, W], validity [B, P] (camera masks, language mask), block flags [B, P] (all 0).
        """
        img_BCNW = self.embed_images(batch.images)
        b, c, n, w = img_BCNW.shape
        lang_BTW = self.embed_tokens(batch.tokens)
        embs = torch.cat([img_BCNW.reshape(b, c * n, w).to(lang_BTW.dtype), lang_BTW], dim=1)
        img_pad = batch.image_masks[:, :, None].expand(b, c, n).reshape(b, c * n)
        pad = torch.cat([img_pad, batch.token_mask], dim=1)
        return embs, pad, torch.zeros_like(pad, dtype=torch.long)

    def embed_suffix(self, x_t_BSA: torch.Tensor, time_B: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Noisy actions -> expert tokens [B, S, W]; time -> adaRMS condition [B, W] (no time token)."""
        sincos = time_sincos(time_B, self.config.expert_width, min_period=self.config.min_period,
                             max_period=self.config.max_period)
        cond = F.silu(self.time_mlp_out(F.silu(self.time_mlp_in(sincos.to(self.time_mlp_in.weight.dtype)))))
        return self.action_in_proj(x_t_BSA.to(self.action_in_proj.weight.dtype)), cond

    # ------------------------------------------------------------------ transformer
    def velocity(self, prefix: tuple[torch.Tensor, torch.Tensor, torch.Tensor], x_t_BSA: torch.Tensor,
                 time_B: torch.Tensor) -> torch.Tensor:
        """Joint forward of prefix and noisy actions; returns the predicted velocity [B, S, A] (float32)."""
        prefix_embs, prefix_pad, prefix_ar = prefix
        suffix_embs, cond = self.embed_suffix(x_t_BSA, time_B)
        b, s = suffix_embs.shape[:2]
        suffix_pad = torch.ones(b, s, dtype=torch.bool, device=suffix_embs.device)
        suffix_ar = torch.zeros(b, s, dtype=torch.long, device=suffix_embs.device)
        suffix_ar[:, 0] = 1
        pad = torch.cat([prefix_pad, suffix_pad], dim=1)
        bias = attention_bias(block_mask(pad, torch.cat([prefix_ar, suffix_ar], dim=1)))
        pos = position_ids(pad)
        h_prefix, h_suffix = prefix_embs, suffix_embs
        cos_sin = self.rotary_emb(h_suffix, pos)
        for i, layer in enumerate(self.layers):
            h_prefix, h_suffix, _ = layer(h_prefix, h_suffix, position_embeddings=cos_sin, attn_bias=bias,
                                          adarms_cond=cond, prefix_output=i < len(self.layers) - 1)
        out, _ = self.expert_norm(h_suffix, cond)
        return self.action_out_proj(out[:, -self.action_horizon:]).float()

    # ------------------------------------------------------------------ training
    def sample_noise_and_time(self, actions_BSA: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Gaussian noise like the actions and t ~ Beta(alpha, beta) * scale + offset per sample."""
        cfg = self.config
        noise = torch.randn(actions_BSA.shape, dtype=torch.float32, device=actions_BSA.device)
        conc = torch.tensor([cfg.time_beta_alpha, cfg.time_beta_beta], dtype=torch.float32,
                            device=actions_BSA.device)
        beta = torch.distributions.Beta(conc[0], conc[1]).sample((actions_BSA.shape[0],))
        return noise, beta * cfg.time_scale + cfg.time_offset

    def forward(self, batch: Pi05PreparedBatch) -> ModelOutput:
        """Training loss: mean over the real action dims (data.action_dim) and the horizon.

        openpi averages over all padded dims; lerobot slices to the real dims first. We follow lerobot so
        that the loss does not shrink with the padding (documented in README.md).
        """
        elements = self.loss_elements(batch)[..., : self.real_action_dim]
        if self.config.mask_padded_actions and batch.action_is_pad is not None:
            keep = (~batch.action_is_pad).to(elements.dtype)[:, :, None].expand_as(elements)
            loss = (elements * keep).sum() / keep.sum().clamp(min=1.0)
        else:
            loss = elements.mean()
        return ModelOutput(loss=loss, metrics={})

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def fill_prefix_cache(self, batch: Pi05PreparedBatch) -> tuple[list[KVCache], torch.Tensor]:
        """Runs the prefix through the VLM once; returns per-layer keys/values and the prefix validity."""
        embs, pad, ar = self.embed_prefix(batch)
        bias = attention_bias(block_mask(pad, ar))
        cos_sin = self.rotary_emb(embs, position_ids(pad))
        cache = []
        h = embs
        for i, layer in enumerate(self.layers):
            h, _, kv = layer(h, None, position_embeddings=cos_sin, attn_bias=bias, adarms_cond=None,
                             prefix_output=i < len(self.layers) - 1)
            cache.append(kv)
        return cache, pad

    @torch.no_grad()
    def cached_velocity(self, cache: list[KVCache], prefix_pad_BP: torch.Tensor, x_t_BSA: torch.Tensor,
                        time_B: torch.Tensor) -> torch.Tensor:
        """Velocity of the expert alone, reading the prefix keys/values from the cache."""
        suffix_embs, cond = self.embed_suffix(x_t_BSA, time_B)
        b, s = suffix_embs.shape[:2]
        # the suffix sees every valid prefix key and every suffix key; positions continue after the prefix
        allowed = torch.cat([prefix_pad_BP[:, None, :].expand(b, s, -1),
                             torch.ones(b, s, s, dtype=torch.bool, device=prefix_pad_BP.device)], dim=2)
        offset = prefix_pad_BP.long().sum(dim=1, keepdim=True)
        pos = offset + torch.arange(s, device=prefix_pad_BP.device)[None, :]
        cos_sin = self.rotary_emb(suffix_embs, pos)
        bias = attention_bias(allowed)
        h = suffix_embs
        for layer, kv in zip(self.layers, cache, strict=True):
            _, h, _ = layer(None, h, position_embeddings=cos_sin, attn_bias=bias, adarms_cond=cond, past=kv)
        out, _ = self.expert_norm(h, cond)
        return self.action_out_proj(out[:, -self.action_horizon:]).float()


def build_model(model_config: Pi05ModelConfig, data_config: Pi05DataConfig) -> Pi05Model:
    """Model factory of the ``pi05`` / ``pi05_tiny`` plugins (random init; see checkpoint.py to load)."""
    return Pi05Model(model_config, data_config)
