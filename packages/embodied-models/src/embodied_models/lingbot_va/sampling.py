"""One chunk of LingBot-VA inference without a KV cache.

The reference (lerobot ``LingBotVAPolicy._infer``; upstream ``wan_va_server.py``) denoises a chunk of video
latents with the observed first frame pinned (timestep 0), writes the finished video into a KV cache with a
last forward at timestep 0, then denoises the chunk's actions attending to that cache. For the first chunk
this equals one joint forward of [clean predicted video at t=0 | noisy actions] where video tokens attend
only to video tokens and action tokens attend to everything, which is what we run (recomputing the video
tokens at each action step instead of caching them). Streaming over many chunks and classifier-free
guidance are not implemented here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from embodied_models.lingbot_va.rope import action_grid_ids, video_grid_ids
from embodied_models.lingbot_va.streams import sigma_schedule

if TYPE_CHECKING:
    from embodied_models.lingbot_va.modeling import LingBotVAModel

__all__ = ["sample_chunk"]


def _euler_grid(shift: float, num_steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    sigmas = sigma_schedule(shift, num_steps)
    return sigmas, torch.cat([sigmas[1:], torch.zeros(1)])


def _draw(shape: tuple[int, ...], generator: torch.Generator, like: torch.Tensor) -> torch.Tensor:
    return torch.randn(shape, generator=generator).to(device=like.device, dtype=like.dtype)


def sample_chunk(model: LingBotVAModel, batch: dict[str, Any], *, noise: dict[str, torch.Tensor] | None = None,
                 num_steps: int | None = None) -> torch.Tensor:
    """Denoises ``data.num_latent_frames`` latent frames after ``batch['latents'][:, :, 0]``, then their actions.

    Args:
        model: a LingBot-VA model.
        batch: ``latents`` [B, C, >=1, H, W] (frame 0 is used) and ``text_emb`` [B, T, text_dim].
        noise: optional ``{"video": [B, C, F, H, W], "action": [B, A, F, n, 1]}``; drawn from the model's
            generator when absent.
        num_steps: overrides both ``model.num_inference_steps`` and ``model.action_num_inference_steps``.

    Returns:
        normalized actions [B, (F-1)*n, U] of the used channels (frame 0 is the observation).
    """
    cfg, data_cfg, net = model.config, model.data_config, model.transformer
    cond, text = batch["latents"][:, :, :1].float(), batch["text_emb"]
    b, c, _, height, width = cond.shape
    frames, n = data_cfg.num_latent_frames, data_cfg.action_per_frame
    noise = noise or {"video": _draw((b, c, frames, height, width), model.generator, cond),
                      "action": _draw((b, cfg.action_dim, frames, n, 1), model.generator, cond)}
    pt, ph, pw = net.patch_size
    v_grid = video_grid_ids(frames // pt, height // ph, width // pw, device=cond.device).expand(b, -1, -1)
    a_grid = action_grid_ids(frames, n, device=cond.device).expand(b, -1, -1)

    video = noise["video"].float().clone()
    sigmas, next_sigmas = _euler_grid(cfg.snr_shift, num_steps or cfg.num_inference_steps)
    for sigma, next_sigma in zip(sigmas.tolist(), next_sigmas.tolist(), strict=True):
        video[:, :, :1] = cond
        t = torch.full((b, frames), sigma * cfg.num_train_timesteps, device=cond.device)
        t[:, 0] = 0.0
        pred = net.video_pred_to_grid(net(video, t, v_grid, text), frames, height, width)
        video = video + pred.float() * (next_sigma - sigma)
    video[:, :, :1] = cond

    used = torch.zeros(cfg.action_dim, dtype=torch.bool, device=cond.device)
    used[cfg.used_action_channel_ids] = True
    video_tokens = v_grid.shape[-1]
    length = video_tokens + a_grid.shape[-1]
    mask = torch.ones(length, length, dtype=torch.bool, device=cond.device)
    mask[:video_tokens, video_tokens:] = False  # video never sees actions (it was cached before them)
    x_video = net.embed_video(video)
    v_temb, v_proj = net.embed_time(torch.zeros(b, frames, device=cond.device), video_tokens // frames,
                                    action=False, dtype=x_video.dtype)
    actions = noise["action"].float().clone()
    sigmas, next_sigmas = _euler_grid(cfg.action_snr_shift, num_steps or cfg.action_num_inference_steps)
    for sigma, next_sigma in zip(sigmas.tolist(), next_sigmas.tolist(), strict=True):
        actions[:, :, :1] = 0.0
        actions[:, ~used] = 0.0
        t = torch.full((b, frames), sigma * cfg.num_train_timesteps, device=cond.device)
        t[:, 0] = 0.0
        a_temb, a_proj = net.embed_time(t, n, action=True, dtype=x_video.dtype)
        x = torch.cat([x_video, net.embed_action(actions)], dim=1)
        out = net.trunk(x, text, torch.cat([v_temb, a_temb], dim=1), torch.cat([v_proj, a_proj], dim=1),
                        torch.cat([v_grid, a_grid], dim=2), mask)
        pred = net.action_proj_out(out[:, video_tokens:]).unflatten(1, (frames, n)).permute(0, 3, 1, 2)
        actions = actions + pred.unsqueeze(-1).float() * (next_sigma - sigma)
    picked = actions[:, cfg.used_action_channel_ids, 1:]  # [B, U, F-1, n, 1]
    return picked.squeeze(-1).flatten(2).transpose(1, 2).contiguous()
