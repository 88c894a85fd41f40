"""FastWAM as an embodied model plugin: a Wan2.2 video DiT and an action DiT joined per layer (MoT).

The model consumes the batch of :class:`embodied_models.fastwam.data.collator.FastWAMCollator`:

- ``video`` [B, 3, T, H, W] in [-1, 1] (cameras side by side), encoded online by the frozen Wan VAE into
  standardized latents [B, C, (T-1)/4 + 1, H/16, W/16]; or ``latents`` (a latent cache) which then wins;
- ``context`` [B, L, text_dim] / ``context_mask`` [B, L]: UMT5 embeddings (text cache);
- ``proprio`` [B, H, D]: the current state (its first row is the proprio context token);
- training: ``action`` [B, H, A], ``action_is_pad`` [B, H], ``image_is_pad`` [B, T].

Training (one step, lerobot 0.6 ``FastWAM.training_loss``): per element one video and one action timestep
``t = 1000 * phi(u, shift)``; ``x_t = (1 - t/1000) x0 + t/1000 noise``, target ``noise - x0``; latent frame 0 is
kept clean with t = 0; ``loss = lambda_video * L_video + lambda_action * L_action``, each a mean over the batch of
(masked per-sample MSE) x (bell-shaped timestep weight). Draws come from the torch RNG the trainer seeds per rank
and checkpoints, in the reference's order (video noise, video u, action noise, action u).

The VAE is not a sub-module (not in the state dict, not sharded, never trained); it is built on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from embodied_core.errors import DataError
from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_core.trainer.activation_checkpoint import set_activation_checkpointing
from embodied_models.fastwam.blocks import DiTBlock, MoTLayer
from embodied_models.fastwam.config import FastWAMModelConfig
from embodied_models.fastwam.experts import ActionExpert, VideoExpert
from embodied_models.fastwam.masks import idm_attention_mask, mot_attention_mask
from embodied_models.wan.flow import (
    bell_weight,
    draw_step_key,
    inference_schedule,
    noise_to,
    sample_generator,
    shift_sigma,
    velocity_target,
)
from embodied_models.wan.rope import GridRope, rope_split, sequence_grid_ids, video_grid_ids

if TYPE_CHECKING:
    from embodied_core.checkpoint.keymap import LoadReport
    from embodied_models.fastwam.data.config import FastWAMDataConfig

__all__ = ["FastWAMMoT", "FastWAMModel", "TrainingOutputs", "build_model", "latent_frame_is_pad"]

VAE_TEMPORAL = 4
_LORA_PROJECTIONS = ("self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o",
                     "cross_attn.q", "cross_attn.k", "cross_attn.v", "cross_attn.o", "ffn.0", "ffn.2")


class FastWAMMoT(nn.Module):
    """The two experts: ``mixtures`` (embedders and heads) and ``layers`` (one :class:`MoTLayer` each)."""

    def __init__(self, cfg: FastWAMModelConfig, *, action_dim: int) -> None:
        super().__init__()
        self.mixtures = nn.ModuleDict({
            "video": VideoExpert(in_channels=cfg.in_channels, out_channels=cfg.out_channels, dim=cfg.video_hidden_dim,
                                 freq_dim=cfg.video_freq_dim, text_dim=cfg.text_dim,
                                 patch_size=tuple(cfg.patch_size), eps=cfg.eps),
            "action": ActionExpert(action_dim=action_dim, dim=cfg.action_hidden_dim, freq_dim=cfg.action_freq_dim,
                                   text_dim=cfg.text_dim),
        })
        fp32 = cfg.fp32_attention
        self.layers = nn.ModuleList([MoTLayer({
            "video": DiTBlock(cfg.video_hidden_dim, cfg.video_ffn_dim, cfg.num_heads, cfg.attn_head_dim, cfg.eps,
                              fp32_attention=fp32),
            "action": DiTBlock(cfg.action_hidden_dim, cfg.action_ffn_dim, cfg.num_heads, cfg.attn_head_dim, cfg.eps,
                               fp32_attention=fp32),
        }) for _ in range(cfg.num_layers)])


class TrainingOutputs(dict):
    """Everything one training forward computed (predictions, targets, timesteps, weights, losses); for tests."""


def latent_frame_is_pad(image_is_pad: torch.Tensor, num_latent: int) -> torch.Tensor:
    """Raw-frame pads [B, 1 + 4k] -> pads of latent frames 1..k [B, k]: padded when all its 4 raw frames are."""
    tail = image_is_pad[:, 1:]
    if tail.shape[1] != VAE_TEMPORAL * (num_latent - 1):
        raise DataError(f"image_is_pad covers {image_is_pad.shape[1]} raw frames but the video has {num_latent} "
                        f"latent frames (expected {VAE_TEMPORAL * (num_latent - 1) + 1} raw frames)")
    return tail.reshape(tail.shape[0], num_latent - 1, VAE_TEMPORAL).all(dim=2)


def _masked_mean(per_item: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
    """Per-sample mean over valid items [B, N] (denominator clamped at 1)."""
    if pad is None:
        return per_item.mean(dim=1)
    valid = (~pad.bool()).to(per_item.dtype)
    return (per_item * valid).sum(dim=1) / valid.sum(dim=1).clamp(min=1.0)


class FastWAMModel(EmbodiedModel):
    """FastWAM: mixture-of-transformers flow matching of video latents and action chunks.

    Args:
        model_config: the ``model:`` section.
        data_config: the ``data:`` section (action width, proprio width, frames).
    """

    def __init__(self, model_config: FastWAMModelConfig, data_config: FastWAMDataConfig) -> None:
        super().__init__()
        self.config = model_config
        self.data_config = data_config
        action_dim = data_config.max_action_dim or data_config.action_dim
        if action_dim is None or (model_config.use_proprio and data_config.state_dim is None):
            raise DataError("FastWAM needs data.action_dim and data.state_dim (unset: read from the dataset); set "
                            f"them for a model built without a dataset (got {data_config.action_dim}, "
                            f"{data_config.state_dim})")
        self.action_dim = int(action_dim)
        self.mot = FastWAMMoT(model_config, action_dim=self.action_dim)
        # model.use_proprio=false: no proprio token (lerobot's proprio_dim=None), no proprio_encoder.* keys
        self.proprio_encoder = (nn.Linear(int(data_config.state_dim), model_config.text_dim)
                                if model_config.use_proprio else None)
        head_dim = model_config.attn_head_dim
        self.video_rope = GridRope(head_dim, model_config.rope_theta, split=rope_split(head_dim, "pairs"))
        self.action_rope = GridRope(head_dim, model_config.rope_theta, split=(head_dim,))
        self.__dict__["_vae"] = None  # not a sub-module: frozen, outside the state dict, built on first use
        for layer in self.mot.layers:
            set_activation_checkpointing(layer, model_config.gradient_checkpointing)

    # ------------------------------------------------------------------ inputs
    def vae(self, device: torch.device) -> Any:
        """The frozen Wan VAE on ``device`` (built on first use from ``model.vae_path`` or the tiny config)."""
        from embodied_models.wan.vae import build_tiny_vae, load_vae

        cfg = self.config
        vae = self.__dict__["_vae"]
        if vae is None:
            if cfg.random_vae:
                vae = build_tiny_vae(seed=0).requires_grad_(False)
            elif cfg.vae_path:
                vae = load_vae(cfg.vae_path)
            else:
                raise DataError("the batch has 'video' but no 'latents' and no VAE is configured: set "
                                "model.vae_path=<diffusers AutoencoderKLWan folder>")
            vae = vae.to(dtype=getattr(torch, cfg.vae_dtype))
            self.__dict__["_vae"] = vae
        if next(vae.parameters()).device != device:
            vae = vae.to(device)
            self.__dict__["_vae"] = vae
        return vae

    def encode_video(self, video: torch.Tensor) -> torch.Tensor:
        """Video [B, 3, T, H, W] in [-1, 1] -> standardized latents [B, C, (T-1)/4 + 1, H/16, W/16] (float32)."""
        from embodied_models.wan.vae import encode_video

        with torch.autocast(device_type=video.device.type, enabled=False):
            return encode_video(self.vae(video.device), video.float())

    def latents(self, batch: dict[str, Any], *, first_frame_only: bool = False) -> torch.Tensor:
        """The batch's clean latents: ``latents`` when given, else the VAE encoding of ``video``."""
        if batch.get("latents") is not None:
            latents = batch["latents"].float()
            return latents[:, :, :1] if first_frame_only else latents
        if batch.get("video") is None:
            raise DataError(f"FastWAM batch has neither 'video' nor 'latents' (keys: {sorted(batch)})")
        video = batch["video"]
        return self.encode_video(video[:, :, :1] if first_frame_only else video)

    def context(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """``[context | proprio_encoder(proprio)]`` [B, L + 1, text_dim] and its key mask [B, L + 1] (without the
        proprio token when ``model.use_proprio`` is off)."""
        context = batch["context"]
        mask = batch.get("context_mask")
        if mask is None:
            mask = torch.ones(context.shape[:2], dtype=torch.bool, device=context.device)
        if self.proprio_encoder is None:
            return context, mask.bool()
        proprio = batch["proprio"]
        proprio = proprio[:, 0] if proprio.dim() == 3 else proprio
        token = self.proprio_encoder(proprio.to(self.proprio_encoder.weight.dtype))[:, None]
        ones = torch.ones(mask.shape[0], 1, dtype=torch.bool, device=mask.device)
        return torch.cat([context.to(token.dtype), token], dim=1), torch.cat([mask.bool(), ones], dim=1)

    # ------------------------------------------------------------------ streams
    def video_stream(self, latents: torch.Tensor, frame_timesteps: torch.Tensor, context: torch.Tensor,
                     context_mask: torch.Tensor) -> tuple[dict[str, Any], torch.Tensor, tuple[int, int, int]]:
        """Video tokens of latents [B, C, F, H, W] with per-frame timesteps [B, f] -> (stream, temb, token grid)."""
        expert = self.mot.mixtures["video"]
        x, grid = expert.embed(latents)
        per_frame = grid[1] * grid[2]
        temb, t_mod = expert.embed_time(frame_timesteps.repeat_interleave(per_frame, dim=1), x.dtype)
        rope = self.video_rope(video_grid_ids(*grid, device=x.device)[None])
        stream = {"x": x, "t_mod": t_mod, "rope": rope, "context": expert.text_embedding(context.to(x.dtype)),
                  "context_mask": context_mask}
        return stream, temb, grid

    def action_stream(self, actions: torch.Tensor, timesteps: torch.Tensor, context: torch.Tensor,
                      context_mask: torch.Tensor) -> dict[str, Any]:
        """Action tokens of actions [B, T, A] at one timestep per element [B]."""
        expert = self.mot.mixtures["action"]
        x = expert.embed(actions)
        _, t_mod = expert.embed_time(timesteps, x.dtype)
        rope = self.action_rope(sequence_grid_ids(x.shape[1], device=x.device)[None])
        return {"x": x, "t_mod": t_mod, "rope": rope, "context": expert.text_embedding(context.to(x.dtype)),
                "context_mask": context_mask}

    def joint_forward(self, video: dict[str, Any], action: dict[str, Any], per_frame: int,
                      mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Both streams through every MoT layer -> (video tokens, action tokens); the mask defaults to the variant's
        :func:`~.masks.mot_attention_mask`."""
        cfg = self.config
        if mask is None:
            mask = mot_attention_mask(video["x"].shape[1], per_frame, action["x"].shape[1], variant=cfg.variant,
                                      video_mode=cfg.video_attention_mask_mode, device=video["x"].device)
        for layer in self.mot.layers:
            out, _ = layer({"video": video, "action": action}, mask)
            video, action = {**video, "x": out["video"]}, {**action, "x": out["action"]}
        return video["x"], action["x"]

    def video_prediction(self, x: torch.Tensor, temb: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
        """Video tokens -> velocity on the latent grid [B, C, F, H, W]."""
        expert = self.mot.mixtures["video"]
        return expert.unpatchify(expert.head(x, temb), grid)

    def frame_timesteps(self, timesteps: torch.Tensor, num_token_frames: int) -> torch.Tensor:
        """Per-element timesteps [B] -> per token frame [B, f], token frame 0 (the clean frame) at 0."""
        t = timesteps[:, None].expand(-1, num_token_frames).clone()
        t[:, 0] = 0.0
        return t

    # ------------------------------------------------------------------ training
    def draw_training_noise(self, latents: torch.Tensor, action: torch.Tensor,
                            sample_index: Sequence[int] | None = None) -> dict[str, torch.Tensor]:
        """The draws of a step (video noise, video u, action noise, action u; variant idm also: the copy's coin, u
        and noise).

        With ``sample_index`` (the dataset indices training batches carry), each sample draws from its own
        generator seeded with (one step key from the torch RNG, its index): a sample's draws depend neither on its
        rank nor on its batch position, so 2 processes with half the batch each draw what 1 process draws with the
        whole batch. Without it (golden replays, hand-made batches), the reference's order from the torch RNG.
        """
        if sample_index is not None:
            return self._keyed_draws(latents, action, sample_index)
        b = latents.shape[0]
        noise_video = torch.randn_like(latents)
        u_video = torch.rand(b, device=latents.device, dtype=torch.float32)
        noise_action = torch.randn_like(action)
        u_action = torch.rand(b, device=action.device, dtype=torch.float32)
        draws = {"noise_video": noise_video, "u_video": u_video, "noise_action": noise_action, "u_action": u_action}
        if self.config.variant == "idm":  # always drawn (no host sync on whether any sample is noised)
            draws["cond_coin"] = torch.rand(b, device=latents.device)
            draws["u_cond"] = torch.rand(b, device=latents.device, dtype=torch.float32)
            draws["noise_cond"] = torch.randn_like(latents)
        return draws

    def _keyed_draws(self, latents: torch.Tensor, action: torch.Tensor, sample_index: Sequence[int]
                     ) -> dict[str, torch.Tensor]:
        """Per-sample draws on CPU generators keyed by (step key, dataset index), moved to the model's device."""
        if len(sample_index) != latents.shape[0]:
            raise DataError(f"FastWAM batch: {len(sample_index)} sample indices for a batch of {latents.shape[0]}")
        step_key = draw_step_key()
        names = ["noise_video", "u_video", "noise_action", "u_action"]
        if self.config.variant == "idm":
            names += ["cond_coin", "u_cond", "noise_cond"]
        per_sample: dict[str, list[torch.Tensor]] = {name: [] for name in names}
        for index in sample_index:
            g = sample_generator(step_key, int(index))
            per_sample["noise_video"].append(torch.randn(latents.shape[1:], generator=g))
            per_sample["u_video"].append(torch.rand((), generator=g))
            per_sample["noise_action"].append(torch.randn(action.shape[1:], generator=g))
            per_sample["u_action"].append(torch.rand((), generator=g))
            if self.config.variant == "idm":
                per_sample["cond_coin"].append(torch.rand((), generator=g))
                per_sample["u_cond"].append(torch.rand((), generator=g))
                per_sample["noise_cond"].append(torch.randn(latents.shape[1:], generator=g))
        like = {"noise_video": latents, "noise_action": action, "noise_cond": latents}
        return {name: torch.stack(values).to(device=latents.device, non_blocking=True,
                                             dtype=like[name].dtype if name in like else torch.float32)
                for name, values in per_sample.items()}

    def training_outputs(self, batch: dict[str, Any], draws: dict[str, torch.Tensor] | None = None
                         ) -> TrainingOutputs:
        """The training forward with its intermediates (draws from the torch RNG unless given)."""
        cfg = self.config
        x0 = self.latents(batch)
        action = batch["action"].float()
        draws = draws if draws is not None else self.draw_training_noise(x0, action, batch.get("sample_index"))
        steps = float(cfg.num_train_timesteps)
        t_video = shift_sigma(draws["u_video"].float(), cfg.video_train_shift) * steps
        t_action = shift_sigma(draws["u_action"].float(), cfg.action_train_shift) * steps
        sigma_v = (t_video / steps).view(-1, 1, 1, 1, 1)
        noisy_video = noise_to(x0, draws["noise_video"], sigma_v)
        noisy_video[:, :, :1] = x0[:, :, :1]
        target_video = velocity_target(x0, draws["noise_video"])
        noisy_action = noise_to(action, draws["noise_action"], (t_action / steps).view(-1, 1, 1))
        target_action = velocity_target(action, draws["noise_action"])

        context, context_mask = self.context(batch)
        num_token_frames = x0.shape[2] // cfg.patch_size[0]
        video, temb, grid = self.video_stream(noisy_video, self.frame_timesteps(t_video, num_token_frames), context,
                                              context_mask)
        action_in = self.action_stream(noisy_action, t_action, context, context_mask)
        if cfg.variant == "idm":
            video_x, action_x = self._idm_forward(x0, video, action_in, grid, draws, context, context_mask)
        else:
            video_x, action_x = self.joint_forward(video, action_in, grid[1] * grid[2])
        pred_video = self.video_prediction(video_x, temb, grid)
        pred_action = self.mot.mixtures["action"].head(action_x)

        per_frame = (pred_video[:, :, 1:].float() - target_video[:, :, 1:].float()).square().mean(dim=(1, 3, 4))
        image_pad = batch.get("image_is_pad")
        frame_pad = None if image_pad is None else latent_frame_is_pad(image_pad.bool(), x0.shape[2])
        video_per_sample = _masked_mean(per_frame, frame_pad)
        per_step = (pred_action.float() - target_action.float()).square().mean(dim=2)
        action_per_sample = _masked_mean(per_step, batch.get("action_is_pad"))
        video_weight = bell_weight(t_video, cfg.video_train_shift, cfg.num_train_timesteps)
        action_weight = bell_weight(t_action, cfg.action_train_shift, cfg.num_train_timesteps)
        loss_video = (video_per_sample * video_weight).mean()
        loss_action = (action_per_sample * action_weight).mean()
        loss = cfg.lambda_video * loss_video + cfg.lambda_action * loss_action
        return TrainingOutputs(loss=loss, loss_video=loss_video, loss_action=loss_action, pred_video=pred_video,
                               pred_action=pred_action, target_video=target_video, target_action=target_action,
                               noisy_video=noisy_video, noisy_action=noisy_action, t_video=t_video,
                               t_action=t_action, video_weight=video_weight, action_weight=action_weight,
                               video_loss_per_frame=per_frame, video_loss_per_sample=video_per_sample,
                               action_loss_per_step=per_step, action_loss_per_sample=action_per_sample, **draws)

    def _idm_forward(self, x0: torch.Tensor, video: dict[str, Any], action: dict[str, Any],
                     grid: tuple[int, int, int], draws: dict[str, torch.Tensor], context: torch.Tensor,
                     context_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Variant idm: [noisy video | teacher-forced copy (clean, or noised with prob idm_cond_noise_prob) |
        actions] under :func:`~.masks.idm_attention_mask`; returns the noisy video's and the actions' tokens."""
        cfg = self.config
        steps = float(cfg.num_train_timesteps)
        noised = draws["cond_coin"].to(x0.device) < cfg.idm_cond_noise_prob
        t_cond = torch.where(noised, shift_sigma(draws["u_cond"].float(), cfg.video_train_shift) * steps,
                             torch.zeros_like(draws["u_cond"]))
        cond = noise_to(x0, draws["noise_cond"], (t_cond / steps).view(-1, 1, 1, 1, 1))
        cond[:, :, :1] = x0[:, :, :1]
        copy, _, _ = self.video_stream(cond, self.frame_timesteps(t_cond, grid[0]), context, context_mask)
        lv = video["x"].shape[1]
        merged = {**video, **{k: torch.cat([video[k], copy[k]], dim=1) for k in ("x", "t_mod", "rope")}}
        mask = idm_attention_mask(lv, grid[1] * grid[2], action["x"].shape[1],
                                  video_mode=cfg.video_attention_mask_mode, device=x0.device)
        video_x, action_x = self.joint_forward(merged, action, grid[1] * grid[2], mask)
        return video_x[:, :lv], action_x

    def forward(self, batch: dict[str, Any]) -> ModelOutput:
        """Training loss of one batch (no host sync)."""
        out = self.training_outputs(batch)
        cfg = self.config
        return ModelOutput(loss=out["loss"], metrics={"loss_video": (cfg.lambda_video * out["loss_video"]).detach(),
                                                      "loss_action": (cfg.lambda_action * out["loss_action"]).detach()})

    # ------------------------------------------------------------------ inference
    @torch.no_grad()
    def sample_actions(self, batch: dict[str, Any], noise: torch.Tensor | dict[str, torch.Tensor] | None = None,
                       num_steps: int | None = None, *, use_kv_cache: bool = True) -> torch.Tensor:
        """Euler sampling of the action chunk [B, H, A] from the first frame, the prompt and the state.

        Variants base/uncond: the first frame's latents run once through the video expert at t = 0 and each
        layer's K/V is cached (``use_kv_cache``; off: the joint forward over [first frame | actions] at every step,
        the same numbers). Variant joint: the future latent frames are denoised together with the actions. Variant
        idm: the video is denoised first (video expert alone), then the actions over its cached K/V.

        Args:
            batch: the collated batch (``video`` or ``latents``, ``context``, ``proprio``).
            noise: initial actions [B, H, A] at sigma = 1, or ``{"action": ..., "video": ...}``; drawn when None.
            num_steps: Euler steps (default ``model.num_inference_steps``).
        """
        from embodied_models.fastwam.sampling import sample_idm, sample_joint, sample_with_first_frame

        noise_map = noise if isinstance(noise, dict) else {"action": noise}
        steps = num_steps or self.config.num_inference_steps
        if self.config.variant == "joint":
            return sample_joint(self, batch, noise_map, steps)
        if self.config.variant == "idm":
            return sample_idm(self, batch, noise_map, steps)
        return sample_with_first_frame(self, batch, noise_map.get("action"), steps, use_kv_cache=use_kv_cache)

    def action_schedule(self, num_steps: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(sigmas, timesteps, deltas) of the action sampling schedule."""
        return inference_schedule(self.config.action_infer_shift, num_steps, self.config.num_train_timesteps)

    # ------------------------------------------------------------------ protocol members
    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """One FSDP unit per MoT layer (its video and action blocks share one attention)."""
        return (MoTLayer,)

    def no_weight_decay(self) -> frozenset[str]:
        """The adaLN modulation tables (block and video-head ``modulation``)."""
        return frozenset(name for name, _ in self.named_parameters() if name.endswith("modulation"))

    def default_lora_targets(self) -> tuple[str, ...]:
        """Self-attention, cross-attention and FFN projections of every block of both experts; embedders, heads,
        time conditioning and the proprio encoder stay as they are."""
        return tuple(f"mot.layers.*.blocks.*.{proj}" for proj in _LORA_PROJECTIONS)

    def load_pretrained_checkpoint(self, path: str | Path) -> LoadReport:
        """``--pretrained-checkpoint``: an embodied, lerobot or LoongForge FastWAM checkpoint (``model.
        pretrained_layout``; auto tells them by their keys; LoongForge aliases are deduplicated); strict."""
        from embodied_models.fastwam.checkpoint import load_pretrained

        return load_pretrained(self, path, layout=self.config.pretrained_layout)


def build_model(model_config: FastWAMModelConfig, data_config: FastWAMDataConfig) -> FastWAMModel:
    """Factory of the ``fastwam`` specs; loads ``model.video_pretrained_path`` / ``action_pretrained_path``."""
    model = FastWAMModel(model_config, data_config)
    if model_config.video_pretrained_path or model_config.action_pretrained_path:
        from embodied_models.fastwam.checkpoint import load_action_backbone, load_video_expert

        if model_config.video_pretrained_path:
            load_video_expert(model, model_config.video_pretrained_path)
        if model_config.action_pretrained_path:
            load_action_backbone(model, model_config.action_pretrained_path)
    return model
