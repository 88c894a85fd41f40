"""X-VLA: Florence-2 encoder + soft-prompted transformer predicting clean action chunks by flow matching.

Port of the computation of lerobot 0.6.1 ``policies/xvla/modeling_xvla.py`` (``XVLAModel``), itself the 2toINF
X-VLA model; see README.md. Flow matching runs with t = 1 as noise: ``x_t = t * noise + (1 - t) * a``; the
network predicts the clean action ``a`` (not a velocity) and the action space's loss compares it to the target.
One uniform draw per batch sets stratified times ``t_b = (u + b / B) mod (1 - 1e-5)``. Sampling re-noises the
current estimate toward the same fixed noise at t = K/K, ..., 1/K.

Shapes: B batch, V views, T action horizon, D action width (the space's), P state width.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers.models.bart.modeling_bart import BartEncoderLayer
from transformers.models.florence2.modeling_florence2 import Florence2VisionBlock

from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_core.trainer.compile import mark_static_shapes
from embodied_models.xvla.action_space import ActionSpace
from embodied_models.xvla.batch import XvlaPreparedBatch
from embodied_models.xvla.checkpoint import LoadReport, load_xvla_checkpoint
from embodied_models.xvla.checks import size_problems
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig
from embodied_models.xvla.florence import FlorenceEncoder
from embodied_models.xvla.layouts import layout_for
from embodied_models.xvla.transformer import SoftPromptedTransformer, XvlaBlock

__all__ = ["LORA_TARGETS", "XvlaModel", "build_model"]

logger = logging.getLogger("embodied.models.xvla")

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

LORA_TARGETS = (
    "vlm.vision_tower.blocks.*.window_attn.qkv", "vlm.vision_tower.blocks.*.window_attn.proj",
    "vlm.vision_tower.blocks.*.channel_attn.qkv", "vlm.vision_tower.blocks.*.channel_attn.proj",
    "vlm.vision_tower.blocks.*.ffn.fc1", "vlm.vision_tower.blocks.*.ffn.fc2",
    "vlm.multi_modal_projector.image_projection",
    "vlm.language_model.encoder.layers.*.self_attn.q_proj", "vlm.language_model.encoder.layers.*.self_attn.k_proj",
    "vlm.language_model.encoder.layers.*.self_attn.v_proj",
    "vlm.language_model.encoder.layers.*.self_attn.out_proj",
    "vlm.language_model.encoder.layers.*.fc1", "vlm.language_model.encoder.layers.*.fc2",
    "transformer.blocks.*.attn.qkv", "transformer.blocks.*.attn.proj",
    "transformer.blocks.*.mlp.fc1", "transformer.blocks.*.mlp.fc2",
    "transformer.vlm_proj", "transformer.aux_visual_proj",
)
"""Every ``nn.Linear`` of the network, as X-VLA's own PEFT recipe adapts (``target_modules="all-linear"``); the
soft prompts and the per-domain action layers are embeddings and are trained in full there (README.md)."""


class XvlaModel(EmbodiedModel):
    """The X-VLA network. ``forward(batch)`` returns the action space's summed loss; ``sample_actions`` infers.

    Args:
        config: network sizes, action space and flow constants.
        data_config: views, horizon and the real action width (``auto`` spaces cover it).
    """

    def __init__(self, config: XvlaModelConfig, data_config: XvlaDataConfig) -> None:
        super().__init__()
        problems = size_problems(config, data_config)
        if problems:
            raise ValueError("X-VLA sizes: " + "; ".join(problems))
        self.config = config
        self.action_horizon = data_config.action_horizon
        self.num_cameras = len(data_config.camera_keys or ()) or data_config.views()
        self.action_space = ActionSpace(layout_for(config.action_mode, action_dim=data_config.action_dim,
                                                   max_action_dim=config.max_action_dim))
        real = data_config.action_dim
        if real is not None and real < self.action_space.dim_action and not self.action_space.layout.fixed_real_dim:
            logger.warning("model.action_mode=%s is %d channels wide; the dataset's %d action dims are zero-padded and "
                           "the space's loss also trains channels %d..%d toward 0 (as X-VLA does); "
                           "model.action_mode=auto trains only the real channels", config.action_mode,
                           self.action_space.dim_action, real, real, self.action_space.dim_action - 1)
        self.dim_proprio = config.max_state_dim if config.use_proprio else 0
        self.vlm = FlorenceEncoder(config)
        # each DaViT stage runs its own fixed shape: --compile gives them static shapes (see mark_static_shapes)
        mark_static_shapes(*(m for m in self.vlm.modules() if isinstance(m, Florence2VisionBlock)))
        self.transformer = SoftPromptedTransformer(
            width=config.hidden_size, depth=config.depth, num_heads=config.num_heads, mlp_ratio=config.mlp_ratio,
            dropout=config.dropout, vlm_width=config.projection_dim, num_domains=config.num_domains,
            dim_action=self.action_space.dim_action, dim_proprio=self.dim_proprio, dim_time=config.dim_time,
            len_soft_prompts=config.len_soft_prompts, max_len_seq=config.max_len_seq,
            time_max_period=config.time_max_period, hetero_proj=config.use_hetero_proj,
            gradient_checkpointing=config.gradient_checkpointing)
        self.register_buffer("pixel_mean", torch.tensor(IMAGENET_MEAN).view(1, 1, 3, 1, 1), persistent=False)
        self.register_buffer("pixel_std", torch.tensor(IMAGENET_STD).view(1, 1, 3, 1, 1), persistent=False)
        if data_config.views() <= 1:
            # one view leaves no auxiliary tokens: the projection stays in the checkpoint but gets no gradient, and
            # freezing it keeps DDP from waiting for one and the optimizer from holding state for it
            self.transformer.aux_visual_proj.requires_grad_(False)

    # ------------------------------------------------------------------ interface
    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """Module classes that are natural FSDP units: DaViT blocks, BART encoder layers, transformer blocks."""
        return (Florence2VisionBlock, BartEncoderLayer, XvlaBlock)

    def no_weight_decay(self) -> frozenset[str]:
        """Position tables, token and soft-prompt embeddings and the per-domain bias tables (beyond biases/norms)."""
        keep = ("pos_emb", "soft_prompt_hub", "embed_positions", "shared", "embed_tokens", "image_position_embed",
                "action_encoder.bias", "action_decoder.bias", "vlm_proj.bias", "aux_visual_proj.bias")
        return frozenset(name for name, param in self.named_parameters()
                         if param.requires_grad and any(part in name for part in keep))

    def default_lora_targets(self) -> tuple[str, ...]:
        """Every linear layer (X-VLA's PEFT recipe uses ``all-linear``); see :data:`LORA_TARGETS`."""
        return LORA_TARGETS

    def load_pretrained_checkpoint(self, path: str | Path, **allow: Any) -> LoadReport:
        """Loads a lerobot (native or vendored Florence-2), 2toINF X-VLA or own-layout checkpoint (strict).

        ``allow`` takes checkpoint.load_xvla_checkpoint's allow_missing/allow_unexpected/allow_mismatched.
        """
        return load_xvla_checkpoint(self, path, **allow)

    # ------------------------------------------------------------------ encoding
    def pixel_values(self, batch: XvlaPreparedBatch) -> torch.Tensor:
        """Florence-2's input [B, V, 3, H, W]: uint8 frames scaled to [0, 1], ImageNet-normalized, padding set to 0;
        float images are taken as already normalized."""
        images = batch.images
        if images.dtype != torch.uint8:
            return images.to(self.pixel_mean.dtype)
        pixels = (images.to(self.pixel_mean.dtype) / 255.0 - self.pixel_mean) / self.pixel_std
        if batch.image_pad is not None:
            h, w = pixels.shape[-2:]
            rows = torch.arange(h, device=pixels.device).view(1, 1, h, 1)
            cols = torch.arange(w, device=pixels.device).view(1, 1, 1, w)
            pad = batch.image_pad.to(pixels.device)
            padded = (rows < pad[..., 0, None, None]) | (cols < pad[..., 1, None, None])
            pixels = pixels.masked_fill(padded[:, :, None], 0.0)
        return pixels

    def encode(self, batch: XvlaPreparedBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(vlm_features, aux_visual_inputs)`` of a batch (see FlorenceEncoder.forward)."""
        return self.vlm(batch.tokens, self.pixel_values(batch), batch.image_masks, encoded_views=self.num_cameras)

    def denoise(self, encoded: tuple[torch.Tensor, torch.Tensor], batch: XvlaPreparedBatch, x_t: torch.Tensor,
                t: torch.Tensor) -> torch.Tensor:
        """The space's preprocessing of (state, x_t), then the transformer's clean-action prediction [B, T, D]."""
        proprio, x_t = self.action_space.preprocess(batch.state.to(x_t.dtype), x_t)
        vlm, aux = encoded
        return self.transformer(domain_id=batch.domain_id, vlm_features=vlm, aux_visual_inputs=aux, x_t=x_t,
                                proprio=proprio, t=t)

    # ------------------------------------------------------------------ training
    @staticmethod
    def flow_times(u: torch.Tensor, batch_size: int) -> torch.Tensor:
        """Stratified times ``(u + b / B) mod (1 - 1e-5)`` from one uniform draw ``u`` [1]."""
        return (u + torch.arange(batch_size, device=u.device, dtype=u.dtype) / batch_size) % (1 - 1e-5)

    def training_outputs(self, batch: XvlaPreparedBatch, *, noise: torch.Tensor | None = None,
                         t_uniform: torch.Tensor | None = None, times: torch.Tensor | None = None,
                         ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The loss dict and the clean-action prediction [B, T, D] of a training batch.

        Args:
            noise: the Gaussian noise [B, T, D] (None: ``randn_like`` of the targets).
            t_uniform: the batch's uniform draw ``u`` [1] that sets the stratified times (None: ``torch.rand(1)``).
            times: per-sample flow times [B], used instead of ``u`` (e.g. to make draws independent of how a
                batch is split over ranks).

        Draws what is not given in the reference's order: ``u = torch.rand(1)``, then ``noise``.
        """
        if batch.actions is None:
            raise ValueError("the batch has no actions; training needs them (inference: sample_actions)")
        actions = batch.actions.float()
        encoded = self.encode(batch)
        b = actions.shape[0]
        if times is not None:
            t = times.to(device=actions.device, dtype=actions.dtype)
        else:
            u = torch.rand(1, device=actions.device) if t_uniform is None else t_uniform.to(actions.device)
            t = self.flow_times(u.float(), b)
        noise = torch.randn_like(actions) if noise is None else noise.to(actions)
        x_t = noise * t.view(-1, 1, 1) + actions * (1 - t).view(-1, 1, 1)
        pred = self.denoise(encoded, batch, x_t, t)
        return self.action_space.losses(pred, actions), pred

    def forward(self, batch: XvlaPreparedBatch) -> ModelOutput:
        """Training loss: the sum of the action space's loss dict (its terms are the metrics)."""
        losses, _ = self.training_outputs(batch)
        return ModelOutput(loss=sum(losses.values()), metrics={k: v.detach() for k, v in losses.items()})

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def sample_actions(self, batch: XvlaPreparedBatch, noise: torch.Tensor | None = None,
                       num_steps: int | None = None) -> torch.Tensor:
        """K steps at t = K/K, ..., 1/K, each re-noising the estimate toward the same noise; returns the last
        estimate with the space's gripper sigmoid, [B, H, D] in model space (the transforms' postprocessing
        drops padding channels and unnormalizes).
        """
        steps = max(1, int(num_steps or self.config.num_denoising_steps))
        b = batch.tokens.shape[0]
        device = batch.tokens.device
        encoded = self.encode(batch)  # before the draw, as the reference orders them
        x1 = (torch.randn(b, self.action_horizon, self.action_space.dim_action, device=device)
              if noise is None else noise.to(device=device, dtype=torch.float32))
        action = torch.zeros_like(x1)
        for i in range(steps, 0, -1):
            t = torch.full((b,), i / steps, device=device, dtype=x1.dtype)
            x_t = x1 * t.view(-1, 1, 1) + action * (1 - t).view(-1, 1, 1)
            action = self.denoise(encoded, batch, x_t, t).float()
        return self.action_space.activate(action)


def build_model(model_config: XvlaModelConfig, data_config: XvlaDataConfig) -> XvlaModel:
    """Model factory of the ``xvla`` / ``xvla_tiny`` plugins (random init; see checkpoint.py to load)."""
    return XvlaModel(model_config, data_config)
