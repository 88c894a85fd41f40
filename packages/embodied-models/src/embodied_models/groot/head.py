"""The flow-matching part every GR00T action head runs the same way (N1.6 and N1.7): velocity of noisy actions,
the training terms with given draws, and Euler sampling.

GR00T's time runs the opposite way to pi0.5: t = 0 is noise and t = 1 is data, ``x_t = (1 - t) noise + t action``,
the target is ``action - noise`` and the network sees only the bucket ``int(t * num_timestep_buckets)``; sampling
integrates ``num_steps`` Euler steps from t = 0 up. A head builds its modules with
:meth:`FlowMatchingHead.build_modules` (``model`` (the DiT), ``state_encoder``, ``action_encoder``,
``action_decoder``, ``vlln``, optionally ``vl_self_attention``, ``position_embedding``, in the checkpoints' order)
and says how it encodes the backbone features (:meth:`FlowMatchingHead.encode_context`); the rest is here.

Shape legend: B batch, H action tokens (model.action_horizon), A max_action_dim, S max_state_dim, L backbone
tokens, D token width (input_embedding_dim), C backbone width.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import attrs
import torch
from torch import nn

from embodied_models.groot.dit import AlternateVLDiT
from embodied_models.groot.layers import CategorySpecificMLP, MultiEmbodimentActionEncoder, masked_flow_loss

__all__ = ["ActionHeadInputs", "FlowMatchingHead"]


@attrs.frozen
class ActionHeadInputs:
    """What the head reads besides the noisy actions.

    Attributes:
        features: backbone features [B, L, C].
        attention_mask: bool [B, L], True for real tokens.
        image_mask: bool [B, L], True for image tokens.
        state: [B, 1, S] normalized, zero-padded state.
        embodiment_id: int64 [B] projector slots.
    """

    features: torch.Tensor
    attention_mask: torch.Tensor
    image_mask: torch.Tensor
    state: torch.Tensor
    embodiment_id: torch.Tensor


class FlowMatchingHead(abc.ABC):
    """Mixin of a GR00T action head (an ``nn.Module`` with ``config.num_timestep_buckets``, ``action_encoder``,
    ``position_embedding``, ``model`` and ``action_decoder``); the head defines how it encodes the features."""

    def build_modules(self, config: Any, *, vl_self_attention: Callable[[], nn.Module] | None = None) -> None:
        """Builds the modules of a GR00T head from the model section, in the order the checkpoints (and the random
        init) have them: the AlternateVL DiT ``model``, ``state_encoder``, ``action_encoder``, ``action_decoder``,
        ``vlln``, ``vl_self_attention`` (built by the factory, when given) and ``position_embedding`` (N(0, 0.02))."""
        self.model = AlternateVLDiT(num_layers=config.dit_num_layers, num_heads=config.dit_num_heads,
                                    head_dim=config.dit_head_dim, output_dim=config.hidden_size,
                                    cross_attention_dim=config.llm_width,
                                    attend_text_every_n_blocks=config.attend_text_every_n_blocks,
                                    dropout=config.dropout)
        self.state_encoder = CategorySpecificMLP(config.max_num_embodiments, config.max_state_dim, config.hidden_size,
                                                 config.input_embedding_dim)
        self.action_encoder = MultiEmbodimentActionEncoder(config.max_action_dim, config.input_embedding_dim,
                                                           config.max_num_embodiments)
        self.action_decoder = CategorySpecificMLP(config.max_num_embodiments, config.hidden_size, config.hidden_size,
                                                  config.max_action_dim)
        self.vlln = nn.LayerNorm(config.llm_width)
        if vl_self_attention is not None:
            self.vl_self_attention = vl_self_attention()
        self.position_embedding = nn.Embedding(config.max_seq_len, config.input_embedding_dim)
        nn.init.normal_(self.position_embedding.weight, mean=0.0, std=0.02)

    @abc.abstractmethod
    def encode_context(self, features: torch.Tensor) -> torch.Tensor:
        """What the DiT cross-attends to, from the backbone features [B, L, C]."""

    def encode_state(self, state: torch.Tensor, embodiment_id: torch.Tensor) -> torch.Tensor:
        """The state token [B, 1, D] from the state [B, 1, S] (the category-specific ``state_encoder``)."""
        return self.state_encoder(state.reshape(state.shape[0], 1, -1), embodiment_id)

    def velocity(self, x_t: torch.Tensor, buckets: torch.Tensor, context: torch.Tensor, state_token: torch.Tensor,
                 inputs: ActionHeadInputs) -> torch.Tensor:
        """Predicted velocity [B, H, A] of the noisy actions ``x_t`` [B, H, A] at ``buckets`` int64 [B]."""
        horizon = x_t.shape[1]
        tokens = self.action_encoder(x_t, buckets, inputs.embodiment_id)
        positions = torch.arange(horizon, dtype=torch.long, device=x_t.device)
        tokens = tokens + self.position_embedding(positions).unsqueeze(0)
        out = self.model(torch.cat([state_token, tokens], dim=1), context, buckets, image_mask=inputs.image_mask,
                         attention_mask=inputs.attention_mask)
        return self.action_decoder(out[:, -horizon:], inputs.embodiment_id)

    def buckets(self, t: torch.Tensor) -> torch.Tensor:
        """``int(t * num_timestep_buckets)`` (truncation) as int64."""
        return (t * self.config.num_timestep_buckets).long()

    def training_terms(self, inputs: ActionHeadInputs, actions: torch.Tensor, action_mask: torch.Tensor, *,
                       noise: torch.Tensor, t: torch.Tensor, drop_state: torch.Tensor | None = None
                       ) -> dict[str, torch.Tensor]:
        """Loss and intermediates of one training forward with given draws.

        Args:
            inputs: backbone features, masks, state and embodiment ids.
            actions, action_mask: [B, H, A] normalized actions and the mask of real dims x horizon steps.
            noise: [B, H, A] Gaussian noise; t: [B] flow time in [0, 1) (1 = data).
            drop_state: bool [B], samples whose state token is zeroed (state dropout); None: keep all.

        Returns:
            ``loss``, ``action_loss`` (per element), ``pred_velocity``, ``velocity_target``, ``x_t``, ``buckets``,
            ``context`` (the VL embeddings) and ``state_token``.
        """
        context = self.encode_context(inputs.features)
        state_token = self.encode_state(inputs.state, inputs.embodiment_id)
        if drop_state is not None:
            state_token = state_token * (1 - drop_state.to(state_token.dtype))[:, None, None]
        t_b = t.to(actions.dtype)[:, None, None]
        x_t = (1 - t_b) * noise + t_b * actions
        target = actions - noise
        buckets = self.buckets(t.to(actions.dtype))
        pred = self.velocity(x_t, buckets, context, state_token, inputs)
        loss, elements = masked_flow_loss(pred, target, action_mask)
        return {"loss": loss, "action_loss": elements, "pred_velocity": pred, "velocity_target": target,
                "x_t": x_t, "buckets": buckets, "context": context, "state_token": state_token}

    @torch.no_grad()
    def sample(self, inputs: ActionHeadInputs, noise: torch.Tensor, num_steps: int) -> torch.Tensor:
        """Euler integration from ``noise`` [B, H, A] at t = 0 to t = 1 in ``num_steps`` steps; the VL embeddings
        and the state token are computed once."""
        context = self.encode_context(inputs.features)
        state_token = self.encode_state(inputs.state, inputs.embodiment_id)
        x = noise
        dt = 1.0 / num_steps
        batch = noise.shape[0]
        for step in range(num_steps):
            bucket = int(step / float(num_steps) * self.config.num_timestep_buckets)
            buckets = torch.full((batch,), bucket, dtype=torch.long, device=noise.device)
            x = x + dt * self.velocity(x, buckets, context, state_token, inputs)
        return x
