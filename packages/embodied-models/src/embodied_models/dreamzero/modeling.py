"""DreamZero as an embodied model plugin: joint video + action flow matching on a causal chunked Wan DiT.

The model consumes the strategy's PreparedBatch (``embodied_models.dreamzero.data``; the golden batch's fields):

- ``images`` uint8 [B, T, H, W, 3] (views already tiled), ``text`` / ``text_attention_mask`` [B, L] (UMT5 ids),
  ``state`` / ``state_mask`` [B, n*spb, S], ``action`` / ``action_mask`` [B, n*apb, A] in [-1, 1],
  ``embodiment_id`` [B], ``has_real_action`` [B];
- optional cache fields: ``video_latents`` [B, C, F, h, w], ``prompt_embs`` [B, L, text_dim],
  ``first_frame_latents`` [B, C, F, h, w] ('i2v'). Absent ones are computed by the frozen encoders
  (``model.online_encoders``); the image-encoder tokens are always computed from the first frame.

Training draws (noise, timestep ids) come from torch's global RNG, which the trainer seeds per rank and
checkpoints, so resuming is exact.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from embodied_core.errors import DataError
from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_models.dreamzero.config import DreamZeroModelConfig
from embodied_models.dreamzero.data.video import video_from_images
from embodied_models.dreamzero.dit import CausalWanBlock, CausalWanDiT
from embodied_models.dreamzero.encoders import FrozenEncoders, encoder_paths, load_encoder_weights
from embodied_models.dreamzero.loss import action_loss, dynamics_loss
from embodied_models.dreamzero.schedule import FlowSchedule, inference_sigmas

if TYPE_CHECKING:
    from embodied_core.checkpoint.keymap import LoadReport

__all__ = ["LORA_MODULES_TO_SAVE", "LORA_PROJECTIONS", "DreamZeroModel", "build_model"]

LORA_PROJECTIONS = ("self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o", "cross_attn.q", "cross_attn.k",
                    "cross_attn.v", "cross_attn.o", "ffn.0", "ffn.2")
"""LoRA-adapted layers of every DiT block (LoongForge's ``(?:q|k|v|o|ffn\\.[02])`` under the DiT)."""
LORA_MODULES_TO_SAVE = ("dit.state_encoder", "dit.action_encoder", "dit.action_decoder")
"""Modules the LoRA recipe trains in full (LoongForge's ``modules_to_save``)."""


class DreamZeroModel(EmbodiedModel):
    """DreamZero: the causal Wan DiT (``dit``) and its frozen encoders (``encoders``).

    Args:
        model_config: the ``model:`` section.
        data_config: the ``data:`` section (kept for the transforms and the policy).
    """

    base_model_prefix = ""
    """PEFT (through transformers' weight-conversion scan) reads this of a model holding transformers models."""

    def __init__(self, model_config: DreamZeroModelConfig, data_config: Any = None) -> None:
        super().__init__()
        self.config = model_config
        self.data_config = data_config
        self.dit = CausalWanDiT(model_config)
        self.encoders = FrozenEncoders(model_config, with_vae_and_text=model_config.online_encoders)
        self.schedule = FlowSchedule(model_config.num_train_timesteps, model_config.shift)
        self._encoders_pending = False  # encoder folders still to read (set by build_model)
        self._hf_owner = {id(m): owner for owner in (self.encoders.text, self.encoders.image) if owner is not None
                          for m in owner.modules()}
        for module in self.dit.modules():
            self._init_dit_module(module)

    # ------------------------------------------------------------------ inputs
    def encode_inputs(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Latents, prompt embeddings, image tokens (and 'i2v' conditioning) of a batch: cache fields or encoders."""
        cfg = self.config
        images = batch["images"]
        cached_video = batch.get("video_latents")
        video = video_from_images(images[:, :1] if cached_video is not None else images, cfg.target_video_size)
        latents = cached_video.float() if cached_video is not None else self.encoders.encode_video(video)
        if cached_video is not None:
            self._check_cached_grid(latents, video)
        prompt = batch.get("prompt_embs")
        mask = batch["text_attention_mask"]
        if prompt is None:
            prompt = self.encoders.encode_text(batch["text"], mask)
        elif prompt.shape[1] != mask.shape[1]:
            raise DataError(f"batch 'prompt_embs' has {prompt.shape[1]} text positions but 'text_attention_mask' has "
                            f"{mask.shape[1]}; rebuild the cache with the strategy's max_text_length")
        elif prompt.shape[-1] != cfg.text_dim:
            raise DataError(f"batch 'prompt_embs' (from {self._cache_source()}) are {prompt.shape[-1]} wide, but "
                            f"model.text_dim={cfg.text_dim}: the cache was built with another text encoder")
        prompt = self._mask_prompt(prompt.float(), mask)
        out = {"latents": latents, "prompt": prompt, "image": self.encoders.encode_image(video[:, :, 0])}
        if cfg.model_type == "i2v":
            out["cond"] = self._first_frame_cond(batch, video[:, :, :1], latents)
        return out

    def _check_cached_grid(self, latents: torch.Tensor, video: torch.Tensor) -> None:
        """Cached latents must have the grid the online VAE would give (frames resized to target_video_size)."""
        vae = self.encoders.vae
        factor = int(vae.config.scale_factor_spatial) if vae is not None else \
            (16 if self.config.model_type == "ti2v" else 8)
        want = (video.shape[-2] // factor, video.shape[-1] // factor)
        if latents.shape[1] != self.config.out_dim:
            raise DataError(f"batch 'video_latents' (from {self._cache_source()}) have {latents.shape[1]} channels, "
                            f"but model.out_dim={self.config.out_dim} (the VAE's z_dim): the cache was built with "
                            "another VAE")
        if tuple(latents.shape[-2:]) != want:
            raise DataError(f"batch 'video_latents' have a {tuple(latents.shape[-2:])} latent grid, but frames of "
                            f"{tuple(video.shape[-2:])} (model.target_video_size={self.config.target_video_size}) "
                            f"encode to {want}: rebuild the cache from frames resized to model.target_video_size")

    def _cache_source(self) -> str:
        """Where cached batch fields come from, for error messages."""
        folder = getattr(self.data_config, "precomputed_cache_dir", None)
        return f"data.precomputed_cache_dir={folder}" if folder else "the batch"

    def _mask_prompt(self, prompt: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = mask.gt(0).sum(dim=1)
        if not self.config.per_sample_prompt_mask:  # the reference: the shortest prompt's length for everyone
            lengths = lengths.min().expand_as(lengths)
        keep = torch.arange(prompt.shape[1], device=prompt.device)[None, :] < lengths[:, None]
        return prompt * keep[..., None].to(prompt.dtype)

    def _first_frame_cond(self, batch: dict[str, Any], first: torch.Tensor, latents: torch.Tensor) -> torch.Tensor:
        """'i2v': [4-channel first-frame mask, latents of (first frame, zeros)] [B, 4 + C, F, h, w]."""
        y = batch.get("first_frame_latents")
        if y is None:
            frames = 1 + (latents.shape[2] - 1) * 4
            pad = first.new_zeros(first.shape[0], 3, frames - 1, *first.shape[3:])
            y = self.encoders.encode_video(torch.cat([first, pad], dim=2))
        y = y.float()
        msk = torch.zeros(y.shape[0], 4, *y.shape[2:], device=y.device)
        msk[:, :, 0] = 1
        return torch.cat([msk, y], dim=1)

    # ------------------------------------------------------------------ training
    def draw_timestep_ids(self, batch_size: int, num_frames: int, num_actions: int,
                          device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Video ids [B, F] (frames of one block share the block's first id) and action ids [B, n*apb]."""
        cfg = self.config
        n = cfg.num_train_timesteps
        if cfg.decouple_video_action_noise:
            beta = torch.distributions.Beta(cfg.video_noise_beta_alpha, cfg.video_noise_beta_beta)
            ratio = beta.sample((batch_size, num_frames))
            ids = ((1.0 - ratio) * n).long().clamp(0, n - 1)
        else:
            ids = torch.randint(0, n, (batch_size, num_frames))
        blocks = ids[:, 1:].reshape(batch_size, -1, cfg.num_frame_per_block)[:, :, :1]
        ids = torch.cat([ids[:, :1], blocks.expand(-1, -1, cfg.num_frame_per_block).flatten(1)], dim=1)
        if cfg.decouple_video_action_noise:
            action_ids = torch.randint(0, n, (batch_size, num_actions))
        else:
            action_ids = blocks.expand(-1, -1, num_actions // blocks.shape[1]).flatten(1)
        return ids.to(device), action_ids.to(device)

    def draw_training_noise(self, batch: dict[str, Any], latents: torch.Tensor, actions: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Timestep ids of the video frames and actions, and the noise of both (torch's global RNG)."""
        del batch
        b, _, num_frames = latents.shape[:3]
        ids, action_ids = self.draw_timestep_ids(b, num_frames, actions.shape[1], latents.device)
        return ids, action_ids, torch.randn_like(latents), torch.randn_like(actions)

    def _noised(self, x: torch.Tensor, noise: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        sigma = self.schedule.lookup("sigmas", ids)
        while sigma.dim() < x.dim():
            sigma = sigma.unsqueeze(-1)
        return (1 - sigma) * x + sigma * noise

    def forward(self, batch: dict[str, Any]) -> ModelOutput:
        """Training loss: weighted dynamics (video) loss + masked action loss. No host sync."""
        cfg = self.config
        inputs = self.encode_inputs(batch)
        latents = inputs["latents"]
        actions = batch["action"].float()
        ids, action_ids, noise, noise_action = self.draw_training_noise(batch, latents, actions)
        frame_ids = ids[:, None, :, None, None].expand(-1, latents.shape[1], -1, *latents.shape[3:])
        noisy = self._noised(latents, noise, frame_ids)
        noisy_actions = self._noised(actions, noise_action, action_ids)
        video_pred, action_pred = self.dit(
            noisy, latents, self.schedule.lookup("timesteps", ids), noisy_actions,
            self.schedule.lookup("timesteps", action_ids), batch["state"].float(), batch["embodiment_id"],
            inputs["prompt"], inputs["image"], inputs.get("cond"))
        dyn = dynamics_loss(video_pred, noise - latents, self.schedule.lookup("weights", ids))
        real = batch["has_real_action"].bool()
        if cfg.action_loss_embodiment_ids is not None:
            allowed = torch.tensor(cfg.action_loss_embodiment_ids, device=real.device)
            real = real & torch.isin(batch["embodiment_id"], allowed)
        act = action_loss(action_pred, noise_action - actions, batch["action_mask"], real,
                          self.schedule.lookup("weights", action_ids))
        return ModelOutput(loss=dyn + act, metrics={"dynamics_loss": dyn.detach(), "action_loss": act.detach()})

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def sample_actions(self, batch: dict[str, Any], noise: Any = None, num_steps: int | None = None) -> torch.Tensor:
        """The next action chunk [B, action_horizon, max_action_dim] (normalized), denoised jointly with the next
        block of latent frames from the current frame (Euler steps on the shifted inference sigmas).

        ``noise``: a tensor (action noise [B, apb, A]) or a dict with ``action`` and ``video``
        ([B, C, fpb, h, w]); missing parts are drawn from torch's RNG.
        """
        cfg = self.config
        first = {key: batch[key] for key in ("images", "text", "text_attention_mask") if key in batch}
        first["images"] = batch["images"][:, :1]
        if batch.get("prompt_embs") is not None:
            first["prompt_embs"] = batch["prompt_embs"]
        if batch.get("video_latents") is not None:
            first["video_latents"] = batch["video_latents"][:, :, :1]
        inputs = self.encode_inputs(first)
        z0 = inputs["latents"][:, :, :1]
        b, c, _, h, w = z0.shape
        fpb, apb, spb = cfg.num_frame_per_block, cfg.num_action_per_block, cfg.num_state_per_block
        noise = noise if isinstance(noise, dict) else {"action": noise}
        act = noise.get("action")
        act = torch.randn(b, apb, cfg.max_action_dim, device=z0.device) if act is None else act.to(z0.device).float()
        vid = noise.get("video")
        vid = torch.randn(b, c, fpb, h, w, device=z0.device) if vid is None else vid.to(z0.device).float()
        clean = torch.cat([z0, torch.zeros_like(vid)], dim=2)
        cond = inputs.get("cond")
        if cond is not None:
            cond = cond[:, :, : 1 + fpb]
        state = batch["state"][:, :spb].float()
        sigmas = inference_sigmas(num_steps or cfg.num_inference_steps, cfg.sigma_shift).to(z0.device)
        for i in range(sigmas.numel() - 1):
            t = sigmas[i] * cfg.num_train_timesteps
            video_t = torch.cat([torch.zeros(b, 1, device=z0.device), t.expand(b, fpb)], dim=1)
            v_pred, a_pred = self.dit(torch.cat([z0, vid], dim=2), clean, video_t, act, t.expand(b, apb), state,
                                      batch["embodiment_id"], inputs["prompt"], inputs["image"], cond)
            step = sigmas[i + 1] - sigmas[i]
            vid = vid + v_pred[:, :, 1:].float() * step
            act = act + a_pred.float() * step
        return act

    # ------------------------------------------------------------------ protocol members
    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """One FSDP unit per DiT block (the root holds embedders, heads, encoders)."""
        return (CausalWanBlock,)

    def no_weight_decay(self) -> frozenset[str]:
        """Biases, norm weights, the adaLN tables and the category biases."""
        return frozenset(name for name, p in self.named_parameters()
                         if p.ndim < 2 or "norm" in name or name.endswith("modulation") or name.endswith(".b"))

    def default_lora_targets(self) -> tuple[str, ...]:
        """Self-attention, text cross-attention and FFN projections of every DiT block (see README; the
        state/action encoders and the action decoder train in full through --lora-modules-to-save)."""
        return tuple(f"dit.blocks.*.{proj}" for proj in LORA_PROJECTIONS)

    def load_pretrained_checkpoint(self, path: str | Path) -> LoadReport:
        """``--pretrained-checkpoint`` in ``model.pretrained_layout`` (diffusers Wan shards, original Wan names,
        a LoongForge DreamZero checkpoint, or ours); strict apart from the parts the layout cannot hold."""
        from embodied_models.dreamzero.checkpoint import load_pretrained

        report = load_pretrained(self, path, layout=self.config.pretrained_layout)
        if self._encoders_pending and not any(p.is_meta for p in self.encoders.parameters()):
            load_encoder_weights(self.encoders, self.config)  # --init-on-meta: the folders after materializing
            self._encoders_pending = False
        return report

    @torch.no_grad()
    def _init_dit_module(self, module: nn.Module) -> None:
        dit = self.dit
        if module is dit.patch_embedding:
            nn.init.xavier_uniform_(module.weight.flatten(1))
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            if module is dit.head.head:
                nn.init.zeros_(module.weight)
            elif any(module is m for m in (*dit.text_embedding, *dit.time_embedding)):
                nn.init.normal_(module.weight, std=0.02)
            else:
                nn.init.xavier_uniform_(module.weight)
            nn.init.zeros_(module.bias)
        else:
            table = module._parameters.get("modulation")
            if table is not None:
                table.copy_(torch.randn_like(table) / table.shape[-1] ** 0.5)
            reset = getattr(module, "reset_parameters", None)
            if callable(reset) and not isinstance(module, nn.Conv3d):
                reset()

    @torch.no_grad()
    def init_module_weights(self, module: nn.Module) -> None:
        """``--init-on-meta``: DiT layers as building does (Wan's xavier / normal / zero head, adaLN tables
        ``randn / sqrt(D)``), transformers encoders by their model's ``_init_weights``, the VAE's norms to 1/0."""
        if any(module is m for m in self.dit.modules()):
            self._init_dit_module(module)
            return
        owner = self._hf_owner.get(id(module))
        if owner is not None:
            owner._init_weights(module)
            return
        gamma = module._parameters.get("gamma")
        if gamma is not None:
            nn.init.ones_(gamma)
            bias = module._parameters.get("bias")
            if bias is not None:
                nn.init.zeros_(bias)
            return
        super().init_module_weights(module)


def build_model(model_config: DreamZeroModelConfig, data_config: Any = None) -> DreamZeroModel:
    """Factory of the ``dreamzero_*`` model specs; the frozen encoders' folders are read right away unless the
    model is built on the meta device (``--init-on-meta``: then by ``load_pretrained_checkpoint``)."""
    model = DreamZeroModel(model_config, data_config)
    model._encoders_pending = bool(encoder_paths(model_config))
    if model._encoders_pending and not any(p.is_meta for p in model.encoders.parameters()):
        load_encoder_weights(model.encoders, model_config)
        model._encoders_pending = False
    return model
