"""FastWAM action sampling: Euler steps of the action expert from sigma = 1 to 0.

- :func:`sample_with_first_frame` (variants base / uncond): actions attend only to the clean first frame, and video
  never attends to actions, so the first frame's per-layer K/V (after RMSNorm and RoPE) is computed once at t = 0
  (:func:`prefill_first_frame`) and reused by every step; ``use_kv_cache=False`` runs the joint forward over
  ``[first frame | actions]`` instead (same numbers, the check of the cache).
- :func:`sample_joint` (variant joint): the future latent frames start from noise and are denoised with the
  actions in one joint forward per step (video with the video infer shift, frame 0 kept clean).
- :func:`sample_idm` (variant idm): the video expert denoises the future frames alone, the clip is prefilled at
  t = 0 and the actions are denoised over its cached K/V (LoongForge's ``FastWAMIDM.infer_joint``).

Initial noise comes from the caller, else from ``model.inference_seed`` when set (lerobot's ``FastWAMPolicy``: a
generator on ``model.rand_device`` seeded with it for each tensor of each call, so every element and every call
starts from the same noise), else from ``torch.randn`` (the policy's generator at inference).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from embodied_models.wan.flow import inference_schedule

if TYPE_CHECKING:
    from embodied_models.fastwam.modeling import FastWAMModel

__all__ = ["prefill_first_frame", "prefill_video", "sample_idm", "sample_joint", "sample_with_first_frame"]

KVCache = list[tuple[torch.Tensor, torch.Tensor]]


def _initial(noise: torch.Tensor | None, shape: tuple[int, ...], ref: torch.Tensor, cfg: Any) -> torch.Tensor:
    if noise is None and cfg.inference_seed is not None:
        # lerobot's _make_*_latents: torch.randn((1, *shape[1:])) on a fresh generator, shared by the batch
        g = torch.Generator(cfg.rand_device).manual_seed(cfg.inference_seed)
        one = torch.randn(shape[1:], generator=g, device=cfg.rand_device, dtype=torch.float32)
        return one.to(ref.device).expand(shape).clone()
    if noise is None:
        return torch.randn(shape, device=ref.device, dtype=torch.float32)
    if tuple(noise.shape) != tuple(shape):
        raise ValueError(f"sample_actions noise has shape {tuple(noise.shape)}, expected {tuple(shape)}")
    return noise.to(device=ref.device, dtype=torch.float32)


def _horizon(model: FastWAMModel, batch: dict[str, Any]) -> int:
    proprio = batch.get("proprio")
    if proprio is None:  # model.use_proprio=false batches need not carry the state
        return int(model.data_config.action_horizon)
    return int(proprio.shape[1]) if proprio.dim() == 3 else 1


def prefill_first_frame(model: FastWAMModel, first: torch.Tensor, context: torch.Tensor,
                        context_mask: torch.Tensor) -> KVCache:
    """Runs the first-frame latents [B, C, 1, H, W] through the video expert at t = 0; per layer (k, v)."""
    return prefill_video(model, first, context, context_mask)


def prefill_video(model: FastWAMModel, latents: torch.Tensor, context: torch.Tensor, context_mask: torch.Tensor,
                  mask: torch.Tensor | None = None) -> KVCache:
    """Runs clean latents [B, C, F, H, W] through the video expert at t = 0 under the video mask; per layer the
    (k, v) after RMSNorm and RoPE."""
    num_token_frames = latents.shape[2] // model.config.patch_size[0]
    zeros = torch.zeros(latents.shape[0], num_token_frames, device=latents.device)
    video, _, _ = model.video_stream(latents, zeros, context, context_mask)
    cache: KVCache = []
    for layer in model.mot.layers:
        out, kv = layer({"video": video}, mask, keep_kv=True)
        cache.append(kv)
        video = {**video, "x": out["video"]}
    return cache


def _action_steps(model: FastWAMModel, x: torch.Tensor, cache: KVCache, context: torch.Tensor,
                  context_mask: torch.Tensor, num_steps: int) -> torch.Tensor:
    """Euler steps of the action expert over [cached video K/V | action K/V] (actions see every cached token)."""
    _, timesteps, deltas = model.action_schedule(num_steps)
    head = model.mot.mixtures["action"].head
    for k in range(num_steps):
        action = model.action_stream(x, timesteps[k].to(x.device).expand(x.shape[0]), context, context_mask)
        for layer, kv in zip(model.mot.layers, cache, strict=True):
            out, _ = layer({"action": action}, None, prefix_kv=kv)
            action = {**action, "x": out["action"]}
        x = x + head(action["x"]).float() * deltas[k].to(x.device)
    return x


def sample_with_first_frame(model: FastWAMModel, batch: dict[str, Any], noise: torch.Tensor | None, num_steps: int,
                            *, use_kv_cache: bool = True) -> torch.Tensor:
    """Actions [B, H, A] for variants base / uncond (see the module docstring)."""
    first = model.latents(batch, first_frame_only=True)
    context, context_mask = model.context(batch)
    b = first.shape[0]
    x = _initial(noise, (b, _horizon(model, batch), model.action_dim), first, model.config)
    if use_kv_cache:
        return _action_steps(model, x, prefill_first_frame(model, first, context, context_mask), context,
                             context_mask, num_steps)
    _, timesteps, deltas = model.action_schedule(num_steps)
    action_head = model.mot.mixtures["action"].head
    for k in range(num_steps):
        action = model.action_stream(x, timesteps[k].to(first.device).expand(b), context, context_mask)
        video, _, grid = model.video_stream(first, torch.zeros(b, 1, device=first.device), context, context_mask)
        _, out_x = model.joint_forward(video, action, grid[1] * grid[2])
        x = x + action_head(out_x).float() * deltas[k].to(x.device)
    return x


def sample_joint(model: FastWAMModel, batch: dict[str, Any], noise: dict[str, torch.Tensor | None],
                 num_steps: int) -> torch.Tensor:
    """Actions [B, H, A] for variant joint: video latent frames 1.. and actions denoised together."""
    cfg = model.config
    first = model.latents(batch, first_frame_only=True)
    context, context_mask = model.context(batch)
    b, c, _, h, w = first.shape
    num_latent = (model.data_config.model_video_frames - 1) // 4 + 1
    x = _initial(noise.get("action"), (b, _horizon(model, batch), model.action_dim), first, cfg)
    video = _initial(noise.get("video"), (b, c, num_latent, h, w), first, cfg)
    video[:, :, :1] = first
    _, t_action, d_action = model.action_schedule(num_steps)
    _, t_video, d_video = inference_schedule(cfg.video_infer_shift, num_steps, cfg.num_train_timesteps)
    num_token_frames = num_latent // cfg.patch_size[0]
    action_head = model.mot.mixtures["action"].head
    for k in range(num_steps):
        tv = model.frame_timesteps(t_video[k].to(first.device).expand(b), num_token_frames)
        video_in, temb, grid = model.video_stream(video, tv, context, context_mask)
        action_in = model.action_stream(x, t_action[k].to(first.device).expand(b), context, context_mask)
        video_x, action_x = model.joint_forward(video_in, action_in, grid[1] * grid[2])
        video = video + model.video_prediction(video_x, temb, grid).float() * d_video[k].to(video.device)
        video[:, :, :1] = first
        x = x + action_head(action_x).float() * d_action[k].to(x.device)
    return x


def sample_idm(model: FastWAMModel, batch: dict[str, Any], noise: dict[str, torch.Tensor | None],
               num_steps: int) -> torch.Tensor:
    """Actions [B, H, A] for variant idm: the future latent frames are denoised by the video expert alone, then the
    denoised clip is prefilled at t = 0 and the actions are denoised over its cached K/V."""
    from embodied_models.fastwam.masks import video_attention_mask

    cfg = model.config
    first = model.latents(batch, first_frame_only=True)
    context, context_mask = model.context(batch)
    b, c, _, h, w = first.shape
    num_latent = (model.data_config.model_video_frames - 1) // 4 + 1
    x = _initial(noise.get("action"), (b, _horizon(model, batch), model.action_dim), first, cfg)
    video = _initial(noise.get("video"), (b, c, num_latent, h, w), first, cfg)
    video[:, :, :1] = first
    _, t_video, d_video = inference_schedule(cfg.video_infer_shift, num_steps, cfg.num_train_timesteps)
    num_token_frames = num_latent // cfg.patch_size[0]
    mask = None
    for k in range(num_steps):
        tv = model.frame_timesteps(t_video[k].to(first.device).expand(b), num_token_frames)
        stream, temb, grid = model.video_stream(video, tv, context, context_mask)
        if mask is None:
            mask = video_attention_mask(stream["x"].shape[1], grid[1] * grid[2], cfg.video_attention_mask_mode,
                                        first.device)
        for layer in model.mot.layers:
            out, _ = layer({"video": stream}, mask)
            stream = {**stream, "x": out["video"]}
        video = video + model.video_prediction(stream["x"], temb, grid).float() * d_video[k].to(video.device)
        video[:, :, :1] = first
    cache = prefill_video(model, video, context, context_mask, mask)
    return _action_steps(model, x, cache, context, context_mask, num_steps)
