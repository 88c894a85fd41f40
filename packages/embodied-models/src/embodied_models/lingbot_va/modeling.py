"""LingBot-VA as an embodied model plugin: the training forward, the RNG it owns, inference and FSDP units.

The model consumes a PreparedBatch of cached inputs (see :mod:`.transforms`):

- ``latents`` [B, C, F, H, W]: normalized Wan2.2 VAE latents (cameras tiled into one latent image);
- ``actions`` / ``actions_mask`` [B, A, F, n, 1]: normalized actions in the model's action space and the mask
  of used channels x valid steps;
- ``text_emb`` [B, T, text_dim]: UMT5 output, zero padded to T; optionally ``null_text_emb`` [B, T0, text_dim],
  the empty prompt's embedding (its valid rows), used for classifier-free-guidance text dropout.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_models.lingbot_va.blocks import LingBotBlock
from embodied_models.lingbot_va.config import LingBotVADataConfig, LingBotVAModelConfig
from embodied_models.lingbot_va.loss import action_loss, video_loss
from embodied_models.lingbot_va.rope import action_grid_ids, video_grid_ids
from embodied_models.lingbot_va.streams import FlowMatchSchedule, StreamDraw, draw_mask_params, draw_stream
from embodied_models.lingbot_va.transformer import LingBotVATransformer

if TYPE_CHECKING:
    from embodied_core.checkpoint.keymap import LoadReport

__all__ = ["LingBotVAModel", "TrainingDraws", "build_model", "transformer_from_config"]

_LORA_PROJECTIONS = ("attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0",
                     "attn2.to_q", "attn2.to_k", "attn2.to_v", "attn2.to_out.0", "ffn.net.0.proj", "ffn.net.2")


def transformer_from_config(cfg: LingBotVAModelConfig) -> LingBotVATransformer:
    """The transformer of a model config (randomly initialized)."""
    return LingBotVATransformer(
        patch_size=tuple(cfg.patch_size), num_attention_heads=cfg.num_attention_heads,
        attention_head_dim=cfg.attention_head_dim, in_channels=cfg.in_channels, out_channels=cfg.out_channels,
        action_dim=cfg.action_dim, text_dim=cfg.text_dim, freq_dim=cfg.freq_dim, ffn_dim=cfg.ffn_dim,
        num_layers=cfg.num_layers, cross_attn_norm=cfg.cross_attn_norm, eps=cfg.eps, rope_theta=cfg.rope_theta,
        attention_backend=cfg.attention_backend)


class TrainingDraws(dict):
    """Everything one training step drew (streams, mask parameters, text dropout); for tests and debugging."""


class LingBotVAModel(EmbodiedModel):
    """LingBot-VA: dual-stream flow matching of video latents and actions on one Wan2.2 transformer.

    Args:
        model_config: the ``model:`` section.
        data_config: the ``data:`` section.
    """

    def __init__(self, model_config: LingBotVAModelConfig, data_config: LingBotVADataConfig) -> None:
        super().__init__()
        self.config = model_config
        self.data_config = data_config
        self.transformer = transformer_from_config(model_config)
        self.transformer.gradient_checkpointing = model_config.gradient_checkpointing
        self.video_schedule = FlowMatchSchedule(model_config.snr_shift, model_config.num_train_timesteps)
        self.action_schedule = FlowMatchSchedule(model_config.action_snr_shift, model_config.num_train_timesteps)
        # The model's own RNG (CPU; see streams.py for why). The trainer seeds it per rank and checkpoints it.
        self.generator = torch.Generator()
        self.generator.manual_seed(0)

    # ------------------------------------------------------------------ RNG the trainer manages
    def seed_rng(self, seed: int) -> None:
        """Seeds the generator every training draw goes through."""
        self.generator.manual_seed(seed)

    def rng_state(self) -> torch.Tensor:
        """The generator's state (a uint8 tensor, checkpoint-safe)."""
        return self.generator.get_state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        """Restores :meth:`rng_state`."""
        self.generator.set_state(state)

    # ------------------------------------------------------------------ training
    def draw_training_streams(self, batch: dict[str, Any]) -> TrainingDraws:
        """Noises video and action, draws mask parameters and text dropout (all from ``self.generator``)."""
        cfg = self.config
        latents, actions, mask = batch["latents"], batch["actions"], batch["actions_mask"]
        video = draw_stream(latents, self.video_schedule, self.generator, noisy_cond_prob=cfg.noisy_cond_prob)
        action = draw_stream(actions, self.action_schedule, self.generator, noisy_cond_prob=0.0, channel_mask=mask)
        chunk, window = draw_mask_params(self.generator, chunk_size_range=tuple(cfg.chunk_size_range),
                                         window_size_range=tuple(cfg.window_size_range))
        text = batch["text_emb"]
        drop = torch.rand(text.shape[0], generator=self.generator) < cfg.text_dropout_prob
        if "null_text_emb" in batch and cfg.text_dropout_prob > 0:
            null = batch["null_text_emb"].to(text.dtype)
            null = torch.nn.functional.pad(null, (0, 0, 0, text.shape[1] - null.shape[1]))
            text = torch.where(drop.to(text.device)[:, None, None], null, text)
        return TrainingDraws(video=video, action=action, chunk_size=chunk, window_size=window, text=text,
                             text_dropped=drop)

    def predict_streams(self, draws: TrainingDraws, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Velocity predictions on the latent grid [B, C, F, H, W] and action grid [B, A, F, n, 1]."""
        video: StreamDraw = draws["video"]
        action: StreamDraw = draws["action"]
        b, _, num_frames, height, width = video.noisy.shape
        pt, ph, pw = self.transformer.patch_size
        device = video.noisy.device
        v_grid = video_grid_ids(num_frames // pt, height // ph, width // pw, device=device).expand(b, -1, -1)
        a_grid = action_grid_ids(num_frames, action.noisy.shape[3], device=device).expand(b, -1, -1)
        video_pred, action_pred = self.transformer.forward_train(
            noisy_video=video.noisy, clean_video=video.clean, noisy_action=action.noisy, clean_action=action.clean,
            video_timesteps=video.timesteps, clean_video_timesteps=video.clean_timesteps,
            action_timesteps=action.timesteps, clean_action_timesteps=action.clean_timesteps,
            video_grid_ids=v_grid, action_grid_ids=a_grid, text=draws["text"],
            chunk_size=draws["chunk_size"], window_size=draws["window_size"])
        video_grid = self.transformer.video_pred_to_grid(video_pred, num_frames, height, width)
        n = action.noisy.shape[3]
        action_grid = action_pred.unflatten(1, (num_frames, n)).permute(0, 3, 1, 2).unsqueeze(-1)
        return video_grid, action_grid

    def forward(self, batch: dict[str, Any]) -> ModelOutput:
        """Training loss on one batch: latent (video) flow-matching loss + action loss. No host sync."""
        draws = self.draw_training_streams(batch)
        video_pred, action_pred = self.predict_streams(draws, batch)
        video, action = draws["video"], draws["action"]
        latent = video_loss(video_pred, video.target, video.weight)
        act = action_loss(action_pred, action.target, batch["actions_mask"], action.weight)
        loss = latent + act
        return ModelOutput(loss=loss, metrics={"latent_loss": latent.detach(), "action_loss": act.detach()})

    # ------------------------------------------------------------------ inference and distribution
    @torch.no_grad()
    def sample_actions(self, batch: dict[str, Any], noise: dict[str, torch.Tensor] | None = None,
                       num_steps: int | None = None) -> torch.Tensor:
        """Imagines the next latent frames from the first one, then denoises their actions.

        See :func:`embodied_models.lingbot_va.sampling.sample_chunk`. Returns normalized actions
        [B, (F-1)*n, len(used_action_channel_ids)] (frame 0 is the observed frame and has no actions).
        """
        from embodied_models.lingbot_va.sampling import sample_chunk

        return sample_chunk(self, batch, noise=noise, num_steps=num_steps)

    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """One FSDP unit per transformer block (the root wraps embedders and heads)."""
        return (LingBotBlock,)

    def no_weight_decay(self) -> frozenset[str]:
        """Biases, norm weights and the adaLN tables: parameters weight decay would only shrink."""
        return frozenset(name for name, p in self.named_parameters()
                         if p.ndim < 2 or "norm" in name or "scale_shift_table" in name)

    @torch.no_grad()
    def init_module_weights(self, module: nn.Module) -> None:
        """Initializes ``module`` as building does (``--init-on-meta``): the adaLN tables of the transformer and its
        blocks as ``randn / sqrt(dim)`` (diffusers' Wan init), every other layer by its ``reset_parameters``."""
        table = module._parameters.get("scale_shift_table")
        if table is not None:
            nn.init.normal_(table, std=table.shape[-1] ** -0.5)
        super().init_module_weights(module)

    def load_pretrained_checkpoint(self, path: str | Path) -> LoadReport:
        """Loads ``--pretrained-checkpoint``: a diffusers ``transformer/`` folder (single file or shards, read a
        tensor at a time, in ``model.pretrained_layout``: ``lingbot_va``, ``lerobot``, ``embodied``, or ``wan22``
        converted on the fly), or an embodied/lerobot checkpoint of the whole model; strict."""
        from embodied_models.lingbot_va.checkpoint import load_pretrained

        return load_pretrained(self, path, layout=self.config.pretrained_layout)

    def default_lora_targets(self) -> tuple[str, ...]:
        """The self-attention, text cross-attention and FFN projections of every transformer block (the video and
        action tokens share these blocks); embedders, time conditioning and output heads stay as they are
        (see README.md)."""
        return tuple(f"transformer.blocks.*.{proj}" for proj in _LORA_PROJECTIONS)


def build_model(model_config: LingBotVAModelConfig, data_config: LingBotVADataConfig) -> LingBotVAModel:
    """Factory of the ``lingbot_va_*`` model specs; loads ``model.pretrained_path`` with a strict report."""
    model = LingBotVAModel(model_config, data_config)
    if model_config.pretrained_path:
        from embodied_models.lingbot_va import checkpoint
        from embodied_models.lingbot_va.reference import check_checkpoint_config

        check_checkpoint_config(model_config, model_config.pretrained_path)  # a lerobot config.json beside it

        if model_config.pretrained_layout == "wan22":
            _, wan_state = checkpoint.read_diffusers_folder(model_config.pretrained_path)
            state = checkpoint.convert_wan22_state_dict(wan_state, model.transformer)
            checkpoint.load_state_strict(model.transformer, state, source=model_config.pretrained_path)
        else:
            checkpoint.load_transformer_folder(model.transformer, model_config.pretrained_path,
                                               layout=model_config.pretrained_layout)
    return model
