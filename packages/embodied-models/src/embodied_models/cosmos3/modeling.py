"""Cosmos3 action policy: Wan2.2 VAE encoder + diffusers' ``Cosmos3OmniTransformer``, our flow objective.

Training (LoongForge's action-policy forward, ``modeling_cosmos3.py``): each video is encoded by the VAE and
cropped to its content; one flow time per sample (``model.train_time_distribution``, shifted by
``model.shift``); latent frames and action rows named clean by the sample's plan (latent frame 0 and the observed
state row 0) keep sigma 0, the others are noised ``sigma * noise + (1 - sigma) * x0``; noised action channels at
or beyond ``raw_action_dim`` are zeroed. The network predicts the velocity ``noise - x0``; the vision loss is the
per-sample mean of the squared error over the whole latent with clean frames masked, the action loss the same
over the rows and the first ``raw_action_dim`` channels; loss = ``vision_loss_weight * vision + action_loss_weight
* action`` (batch means). Draws: :mod:`embodied_models.cosmos3.flow`.

Inference (``sample_actions``, which LoongForge lacks): the first frame of each video is encoded as the clean
condition, the later latent frames and the action rows start from noise and are integrated jointly with Euler
steps over the shifted schedule. With the observed state as action row 0 (batches that carry ``actions``) the
layout is training's; without it the actions are ``action_chunk_length`` noisy rows at offset 1 (diffusers'
pipeline layout).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

from embodied_core.checkpoint.keymap import LoadReport
from embodied_core.errors import DataError
from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_core.trainer.activation_checkpoint import set_activation_checkpointing
from embodied_models.cosmos3.batch import Cosmos3Inputs, read_batch
from embodied_models.cosmos3.config import Cosmos3ModelConfig
from embodied_models.cosmos3.flow import draw_step_key, sample_generator, sampling_sigmas, shift_sigma, train_time
from embodied_models.cosmos3.network import GenInputs, build_transformer, run_network
from embodied_models.cosmos3.packing import pack_batch
from embodied_models.cosmos3.vae import build_vae, encode_videos, latent_statistics, load_vae_weights

__all__ = ["Cosmos3Model", "build_model"]

_GEN_PROJECTIONS = ("self_attn.add_q_proj", "self_attn.add_k_proj", "self_attn.add_v_proj", "self_attn.to_add_out",
                    "mlp_moe_gen.gate_proj", "mlp_moe_gen.up_proj", "mlp_moe_gen.down_proj")


def _trunc_normal_(tensor: torch.Tensor, std: float) -> None:
    nn.init.trunc_normal_(tensor, std=std, a=-3 * std, b=3 * std)


class Cosmos3Model(EmbodiedModel):
    """The Cosmos3 policy. ``forward(batch)`` returns the flow loss; ``sample_actions`` infers action chunks.

    Args:
        config: the ``model:`` section.
        data_config: the ``data:`` section (``action_chunk_length``, ``action_dim``).
    """

    def __init__(self, config: Cosmos3ModelConfig, data_config: Any) -> None:
        super().__init__()
        problems = config.validate()
        if problems:
            raise ValueError("Cosmos3 model config: " + "; ".join(problems))
        self.config = config
        self.chunk_length = int(data_config.action_chunk_length)
        self.raw_action_dim = int(data_config.action_dim or config.max_action_dim)
        self.latent_mean, self.latent_std = latent_statistics(config)
        self.net = build_transformer(config)
        self.vae = build_vae(config)
        self.temporal_compression = int(self.vae.config.scale_factor_temporal)
        if not next(self.parameters()).is_meta:
            for module in reversed(list(self.modules())):
                self._init_own(module)
            if config.vae_path is not None:
                load_vae_weights(self.vae, config.vae_path)
        self._freeze_unreachable()
        for layer in self.net.layers:
            set_activation_checkpointing(layer, config.gradient_checkpointing)

    def _freeze_unreachable(self) -> None:
        """Parameters no loss reaches keep requires_grad=False: the text head, the final text norm and, in the last
        layer, the understanding pathway's query, output projection, post-attention norm and MLP (after the last
        attention the text stream feeds nothing; the generated tokens read only its keys and values); with
        ``model.freeze_understanding`` also the token table and every layer's understanding pathway."""
        last = self.net.layers[-1]
        frozen = [self.net.lm_head, self.net.norm, last.self_attn.to_q, last.self_attn.norm_q,
                  last.self_attn.to_out, last.post_attention_layernorm, last.mlp]
        if self.config.freeze_understanding:
            frozen.append(self.net.embed_tokens)
            for layer in self.net.layers:
                attn = layer.self_attn
                frozen += [attn.to_q, attn.to_k, attn.to_v, attn.to_out, attn.norm_q, attn.norm_k, layer.mlp,
                           layer.input_layernorm, layer.post_attention_layernorm]
        for module in frozen:
            module.requires_grad_(False)

    # ------------------------------------------------------------------ interface
    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """The mixture-of-transformers decoder layers (one understanding + one generation copy each)."""
        return (type(self.net.layers[0]),)

    def no_weight_decay(self) -> frozenset[str]:
        """Trainable names exempt from weight decay: vectors (biases, norm scales, the action modality embedding),
        the token table and the domain-aware projection biases."""
        return frozenset(name for name, param in self.named_parameters() if param.requires_grad and (
            param.ndim < 2 or "norm" in name or name == "net.embed_tokens.weight" or name.endswith(".bias.weight")))

    def default_lora_targets(self) -> tuple[str, ...]:
        """The generation pathway's attention and MLP projections of every layer (LoongForge trains the
        ``_moe_gen`` expert and keeps the Qwen3-VL understanding pathway as it is)."""
        return tuple(f"net.layers.*.{proj}" for proj in _GEN_PROJECTIONS)

    def load_pretrained_checkpoint(self, path: str | Path) -> LoadReport:
        """LoongForge DCP (``model/.metadata``, keys ``net.*``), a diffusers transformer folder or file, or an
        embodied checkpoint (see :mod:`embodied_models.cosmos3.checkpoint`); strict."""
        from embodied_models.cosmos3.checkpoint import load_cosmos3_checkpoint

        return load_cosmos3_checkpoint(self, path)

    @torch.no_grad()
    def init_module_weights(self, module: nn.Module) -> None:
        """Initializes ``module`` as building does (``--init-on-meta``): torch's layers by ``reset_parameters``,
        RMSNorm scales at one, the mRoPE frequencies recomputed, LoongForge's truncated-normal init of the
        projections, time embedding, action heads and action modality embedding; the VAE from ``model.vae_path``."""
        super().init_module_weights(module)
        self._init_own(module)
        if module is self.vae and self.config.vae_path is not None:
            load_vae_weights(self.vae, self.config.vae_path)

    @torch.no_grad()
    def _init_own(self, module: nn.Module) -> None:
        from diffusers.models.transformers.transformer_cosmos3 import (
            Cosmos3VLTextRotaryEmbedding,
            DomainAwareLinear,
        )

        hidden = self.config.hidden_size
        if isinstance(module, DomainAwareLinear):
            _trunc_normal_(module.fc.weight, 1.0 / math.sqrt(module.input_size))
            module.bias.weight.zero_()
        elif isinstance(module, Cosmos3VLTextRotaryEmbedding):
            d = self.config.head_dim
            module.inv_freq.copy_(1.0 / (self.config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)))
        elif module is self.net:
            _trunc_normal_(module.action_modality_embed, 1.0 / math.sqrt(hidden))
            for linear in (module.proj_in, module.time_embedder.linear_1):
                _trunc_normal_(linear.weight, 1.0 / math.sqrt(linear.in_features))
                linear.bias.zero_()
            for linear in (module.proj_out, module.time_embedder.linear_2):
                _trunc_normal_(linear.weight, 1.0 / math.sqrt(hidden))
                linear.bias.zero_()
        else:
            for name in ("weight", "gamma"):
                param = module._parameters.get(name)
                if param is not None and type(module).__name__ in ("RMSNorm", "WanRMS_norm"):
                    param.fill_(1.0)

    # ------------------------------------------------------------------ training
    def _latents(self, inputs: Cosmos3Inputs, *, first_frame_only: bool = False) -> list[torch.Tensor]:
        videos = [v[:, :1] for v in inputs.videos] if first_frame_only else inputs.videos
        return encode_videos(self.vae, videos, inputs.content_hw, self.latent_mean, self.latent_std,
                             content_only=self.config.vae_encode_content_only)

    def forward(self, batch: Any) -> ModelOutput:
        """Vision + action flow-matching loss of a training batch (metrics: ``vision_loss``, ``action_loss``)."""
        inputs = read_batch(batch)
        if inputs.actions is None or inputs.raw_action_dims is None:
            raise DataError("Cosmos3 training batch has no actions/raw_action_dims (an inference observation?)")
        cfg = self.config
        latents = self._latents(inputs)
        step_key = draw_step_key()
        gens, targets_v, targets_a = [], [], []
        for i, latent in enumerate(latents):
            generator = sample_generator(step_key, inputs.sample_keys[i])
            sigma = shift_sigma(1.0 - train_time(cfg.train_time_distribution, generator), cfg.shift)
            noise_v = torch.randn(latent.shape, generator=generator).to(latent.device)
            action = inputs.actions[i].float()
            noise_a = torch.randn(action.shape, generator=generator).to(action.device)
            plan = inputs.plans[i]
            noisy_frames = _noisy(latent.shape[1], plan.condition_frames_vision, latent.device)
            noisy_rows = _noisy(action.shape[0], plan.condition_rows_action, action.device)
            sig_v = sigma.to(latent.device) * noisy_frames.float()[None, :, None, None]
            sig_a = sigma.to(action.device) * noisy_rows.float()[:, None]
            x_v = sig_v * noise_v + (1.0 - sig_v) * latent
            x_a = sig_a * noise_a + (1.0 - sig_a) * action
            x_a[:, inputs.raw_action_dims[i]:] = 0.0
            gens.append(GenInputs(latent=x_v, actions=x_a, noisy_frames=noisy_frames, noisy_rows=noisy_rows,
                                  timestep=sigma * 1000.0, domain_id=inputs.domain_ids[i]))
            targets_v.append(noise_v - latent)
            targets_a.append(noise_a - action)
        pred_v, pred_a = self.predict_velocity(inputs, gens)
        vision, action = [], []
        for i in range(inputs.size):
            g, dim = gens[i], inputs.raw_action_dims[i]
            err_v = (pred_v[i].float() - targets_v[i]) ** 2 * g.noisy_frames.float()[None, :, None, None]
            vision.append(err_v.mean())
            err_a = ((pred_a[i].float() - targets_a[i]) ** 2)[:, :dim] * g.noisy_rows.float()[:, None]
            action.append(err_a.mean())
        vision_loss, action_loss = torch.stack(vision).mean(), torch.stack(action).mean()
        loss = cfg.vision_loss_weight * vision_loss + cfg.action_loss_weight * action_loss
        return ModelOutput(loss=loss, metrics={"vision_loss": vision_loss.detach(),
                                               "action_loss": action_loss.detach()})

    def predict_velocity(self, inputs: Cosmos3Inputs, gens: list[GenInputs]
                         ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The network's velocity predictions (latents, actions) for noised generation inputs."""
        packed = pack_batch(self.config, inputs.text_ids, gens, inputs.fps,
                            [p.action_start_frame_offset for p in inputs.plans],
                            temporal_compression=self.temporal_compression)
        return run_network(self.net, packed)

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def sample_actions(self, batch: Any, noise: Any = None, num_steps: int | None = None) -> torch.Tensor:
        """Action chunks ``[B, action_chunk_length, max_action_dim]`` (the rows after the observed state).

        ``noise``: None (torch's RNG), or a dict with ``"action"`` ``[B, rows, max_action_dim]`` and optionally
        ``"video"`` ``[B, C, T', h, w]`` (the latent frames; the condition frame is overwritten).
        """
        cfg = self.config
        inputs = read_batch(batch)
        steps = int(num_steps or cfg.num_inference_steps)
        cond = self._latents(inputs, first_frame_only=True)
        frames = self.chunk_length // self.temporal_compression + 1
        gens, clean_a = [], []
        for i, first in enumerate(cond):
            c, _, h, w = first.shape
            observed = inputs.actions is not None and inputs.actions[i].shape[0] >= 1
            rows = self.chunk_length + 1 if observed else self.chunk_length
            if not observed:
                inputs.plans[i].action_start_frame_offset = 1
                inputs.plans[i].condition_rows_action = ()
            video_noise = _noise(noise, "video", i, (c, frames, h, w), first)
            action_noise = _noise(noise, "action", i, (rows, cfg.max_action_dim), first)
            noisy_frames = _noisy(frames, inputs.plans[i].condition_frames_vision, first.device)
            noisy_rows = _noisy(rows, inputs.plans[i].condition_rows_action, first.device)
            latent = torch.where(noisy_frames[None, :, None, None], video_noise, first.expand(-1, frames, -1, -1))
            action = action_noise.clone()
            if observed:
                action[0] = inputs.actions[i][0].float().to(first.device)
            action = torch.where(noisy_rows[:, None], action_noise, action)
            dim = inputs.raw_action_dims[i] if inputs.raw_action_dims is not None else self.raw_action_dim
            action[:, dim:] = 0.0
            gens.append(GenInputs(latent=latent, actions=action, noisy_frames=noisy_frames, noisy_rows=noisy_rows,
                                  timestep=torch.tensor(1000.0), domain_id=inputs.domain_ids[i]))
            clean_a.append((noisy_rows, dim))
        sigmas = sampling_sigmas(steps, cfg.shift)
        for k in range(steps):
            for g in gens:
                g.timestep = torch.tensor(float(sigmas[k]) * 1000.0)
            pred_v, pred_a = self.predict_velocity(inputs, gens)
            delta = float(sigmas[k + 1] - sigmas[k])
            for g, v, a, (noisy_rows, dim) in zip(gens, pred_v, pred_a, clean_a, strict=True):
                g.latent = g.latent + delta * v.float() * g.noisy_frames[None, :, None, None]
                g.actions = g.actions + delta * a.float() * noisy_rows[:, None]
                g.actions[:, dim:] = 0.0
        return torch.stack([g.actions[-self.chunk_length:] for g in gens])


def _noisy(length: int, clean: tuple[int, ...], device: torch.device) -> torch.Tensor:
    mask = torch.ones(length, dtype=torch.bool, device=device)
    for index in clean:
        if 0 <= index < length:
            mask[index] = False
    return mask


def _noise(noise: Any, key: str, i: int, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    if isinstance(noise, dict) and noise.get(key) is not None:
        value = noise[key][i]
        if tuple(value.shape) != shape:
            raise ValueError(f"sample_actions noise[{key!r}][{i}] has shape {tuple(value.shape)}, expected {shape}")
        return value.to(device=like.device, dtype=torch.float32)
    return torch.randn(shape, device=like.device, dtype=torch.float32)


def build_model(model_config: Cosmos3ModelConfig, data_config: Any) -> Cosmos3Model:
    """Factory named by the cosmos3 specs."""
    return Cosmos3Model(model_config, data_config)
