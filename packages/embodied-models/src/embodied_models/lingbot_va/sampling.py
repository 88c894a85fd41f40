"""One chunk of LingBot-VA inference without a KV cache.

The reference (lerobot ``LingBotVAPolicy._infer``; upstream ``wan_va_server.py``) denoises a chunk of video
latents with the observed first frame pinned (timestep 0), writes the finished video into a KV cache with a
last forward at timestep 0, then denoises the chunk's actions attending to that cache. For the first chunk
this equals one joint forward of [clean predicted video at t=0 | noisy actions] where video tokens attend
only to video tokens and action tokens attend to everything, which is what we run (recomputing the video
tokens at each action step instead of caching them). Classifier-free guidance (``model.guidance_scale`` for video,
``model.action_guidance_scale`` for actions) runs the prompt and the empty prompt (``null_text_emb``) as one
doubled batch, ``uncond + s (cond - uncond)``, as the reference. ``model.video_exec_step`` k (the reference's
``video_exec_step``; -1: off) cuts the video loop after k Euler steps: the actions then attend to the video as it was
fed to the k-th step (at that step's timestep, frame 0 clean), which is what the reference caches. Streaming over many
chunks is :mod:`.streaming`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import torch

from embodied_models.lingbot_va.config import LingBotVAModelConfig
from embodied_models.lingbot_va.rope import action_grid_ids, video_grid_ids
from embodied_models.lingbot_va.streams import sigma_schedule
from embodied_models.lingbot_va.transformer import LingBotVATransformer

if TYPE_CHECKING:
    from embodied_models.lingbot_va.modeling import LingBotVAModel

__all__ = ["sample_chunk"]


def _euler_grid(shift: float, num_steps: int) -> tuple[list[float], list[float]]:
    sigmas = sigma_schedule(shift, num_steps)
    return sigmas.tolist(), torch.cat([sigmas[1:], torch.zeros(1)]).tolist()


def _guided(run: Any, x: torch.Tensor, text: torch.Tensor, null_text: torch.Tensor | None,
            scale: float) -> torch.Tensor:
    """``run(x, text)`` with classifier-free guidance over a doubled batch (prompt, empty prompt)."""
    if scale <= 1.0 or null_text is None:
        return run(x, text)
    cond, uncond = run(torch.cat([x, x]), torch.cat([text, null_text])).chunk(2)
    return uncond + scale * (cond - uncond)


def _draw(shape: tuple[int, ...], generator: torch.Generator, like: torch.Tensor) -> torch.Tensor:
    return torch.randn(shape, generator=generator).to(device=like.device, dtype=like.dtype)


@attrs.frozen
class _Chunk:
    """What both denoising loops share."""

    net: LingBotVATransformer
    cfg: LingBotVAModelConfig
    cond: torch.Tensor  # observed first latent frame [B, C, 1, H, W]
    text: torch.Tensor
    null_text: torch.Tensor | None
    frames: int
    n: int
    v_grid: torch.Tensor
    a_grid: torch.Tensor

    def timesteps(self, sigma: float) -> torch.Tensor:
        """Per-frame timesteps [B, F]; frame 0 (the observation) is clean."""
        t = torch.full((self.cond.shape[0], self.frames), sigma * self.cfg.num_train_timesteps,
                       device=self.cond.device)
        t[:, 0] = 0.0
        return t


def _denoise_video(chunk: _Chunk, video: torch.Tensor, num_steps: int) -> tuple[torch.Tensor, float]:
    """The denoised chunk and the sigma the actions see it at: (video after every step, 0) or, with
    ``model.video_exec_step`` k, (the input of the k-th step, its sigma)."""
    net, (b, _, _, height, width) = chunk.net, chunk.cond.shape
    cut = chunk.cfg.video_exec_step
    grid = list(zip(*_euler_grid(chunk.cfg.snr_shift, num_steps), strict=True))
    for i, (sigma, next_sigma) in enumerate(grid):
        video[:, :, :1] = chunk.cond
        if i == cut - 1:
            return video, sigma
        t = chunk.timesteps(sigma)

        def run(x: torch.Tensor, txt: torch.Tensor, t: torch.Tensor = t) -> torch.Tensor:
            reps = x.shape[0] // b
            pred = net(x, t.repeat(reps, 1), chunk.v_grid.repeat(reps, 1, 1), txt)
            return net.video_pred_to_grid(pred, chunk.frames, height, width)

        video = video + _guided(run, video, chunk.text, chunk.null_text, chunk.cfg.guidance_scale).float() * (
            next_sigma - sigma)
    video[:, :, :1] = chunk.cond
    return video, 0.0


def _denoise_actions(chunk: _Chunk, video: torch.Tensor, actions: torch.Tensor, num_steps: int,
                     video_sigma: float = 0.0) -> torch.Tensor:
    net, cfg, b = chunk.net, chunk.cfg, chunk.cond.shape[0]
    unused = torch.ones(cfg.action_dim, dtype=torch.bool, device=actions.device)
    unused[cfg.used_action_channel_ids] = False
    video_tokens = chunk.v_grid.shape[-1]
    length = video_tokens + chunk.a_grid.shape[-1]
    mask = torch.ones(length, length, dtype=torch.bool, device=actions.device)
    mask[:video_tokens, video_tokens:] = False  # video never sees actions (it was cached before them)
    grid = torch.cat([chunk.v_grid, chunk.a_grid], dim=2)
    v_temb, v_proj = net.embed_time(chunk.timesteps(video_sigma), video_tokens // chunk.frames,
                                    action=False, dtype=net.patch_embedding_mlp.weight.dtype)
    for sigma, next_sigma in zip(*_euler_grid(cfg.action_snr_shift, num_steps), strict=True):
        actions[:, :, :1] = 0.0
        actions[:, unused] = 0.0
        a_temb, a_proj = net.embed_time(chunk.timesteps(sigma), chunk.n, action=True, dtype=v_temb.dtype)
        temb, proj = torch.cat([v_temb, a_temb], dim=1), torch.cat([v_proj, a_proj], dim=1)

        def run(x: torch.Tensor, txt: torch.Tensor, temb: torch.Tensor = temb,
                proj: torch.Tensor = proj) -> torch.Tensor:
            reps = x.shape[0] // b
            tokens = torch.cat([net.embed_video(video.repeat(reps, 1, 1, 1, 1)), net.embed_action(x)], dim=1)
            out = net.trunk(tokens, txt, temb.repeat(reps, 1, 1), proj.repeat(reps, 1, 1, 1),
                            grid.repeat(reps, 1, 1), mask)
            pred = net.action_proj_out(out[:, video_tokens:])
            return pred.unflatten(1, (chunk.frames, chunk.n)).permute(0, 3, 1, 2).unsqueeze(-1)

        velocity = _guided(run, actions, chunk.text, chunk.null_text, cfg.action_guidance_scale)
        actions = actions + velocity.float() * (next_sigma - sigma)
    return actions


def sample_chunk(model: LingBotVAModel, batch: dict[str, Any], *, noise: dict[str, torch.Tensor] | None = None,
                 num_steps: int | None = None) -> torch.Tensor:
    """Denoises ``data.num_latent_frames`` latent frames after ``batch['latents'][:, :, 0]``, then their actions.

    Args:
        model: a LingBot-VA model.
        batch: ``latents`` [B, C, >=1, H, W] (frame 0 is used), ``text_emb`` [B, T, text_dim] and, for
            guidance, ``null_text_emb`` [B, T0, text_dim].
        noise: optional ``{"video": [B, C, F, H, W], "action": [B, A, F, n, 1]}``; drawn from the model's
            generator when absent.
        num_steps: overrides both ``model.num_inference_steps`` and ``model.action_num_inference_steps``.

    Returns:
        normalized actions [B, (F-1)*n, U] of the used channels (frame 0 is the observation).
    """
    cfg, data_cfg, net = model.config, model.data_config, model.transformer
    cond, text = batch["latents"][:, :, :1].float(), batch["text_emb"]
    null_text = batch.get("null_text_emb")
    if null_text is not None:
        null_text = torch.nn.functional.pad(null_text.to(text.dtype), (0, 0, 0, text.shape[1] - null_text.shape[1]))
    b, c, _, height, width = cond.shape
    frames, n = data_cfg.num_latent_frames, data_cfg.action_per_frame
    noise = noise or {"video": _draw((b, c, frames, height, width), model.generator, cond),
                      "action": _draw((b, cfg.action_dim, frames, n, 1), model.generator, cond)}
    pt, ph, pw = net.patch_size
    chunk = _Chunk(net=net, cfg=cfg, cond=cond, text=text, null_text=null_text, frames=frames, n=n,
                   v_grid=video_grid_ids(frames // pt, height // ph, width // pw, device=cond.device).expand(b, -1, -1),
                   a_grid=action_grid_ids(frames, n, device=cond.device).expand(b, -1, -1))
    video, video_sigma = _denoise_video(chunk, noise["video"].float().clone(), num_steps or cfg.num_inference_steps)
    actions = _denoise_actions(chunk, video, noise["action"].float().clone(),
                               num_steps or cfg.action_num_inference_steps, video_sigma)
    picked = actions[:, cfg.used_action_channel_ids, 1:]  # [B, U, F-1, n, 1]
    return picked.squeeze(-1).flatten(2).transpose(1, 2).contiguous()
