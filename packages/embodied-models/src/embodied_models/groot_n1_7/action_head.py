"""GR00T N1.7's action head: embodiment tables, state/action encoders, the DiT and the flow-matching objective.

Port of the computation of lerobot 0.6.1 ``GR00TN17ActionHead`` (``policies/groot/groot_n1_7.py``), which follows
Isaac-GR00T's ``gr00t_n1d7``. GR00T's time runs the opposite way to pi0.5: t = 0 is noise and t = 1 is data,
``x_t = (1 - t) noise + t action``, the target is ``action - noise`` and the network sees only the bucket
``int(t * num_timestep_buckets)``; sampling integrates 4 Euler steps from t = 0 up.

Shape legend: B batch, H action tokens (model.action_horizon), A max_action_dim, S max_state_dim, L backbone
tokens, D token width (input_embedding_dim), C backbone width.
"""

from __future__ import annotations

import attrs
import torch
import torch.nn.functional as F
from torch import nn

from embodied_models.groot_n1_7.config import GrootModelConfig
from embodied_models.groot_n1_7.dit import AlternateVLDiT, SelfAttentionStack

__all__ = ["ActionHeadInputs", "CategorySpecificLinear", "CategorySpecificMLP", "GrootActionHead",
           "MultiEmbodimentActionEncoder", "masked_flow_loss", "time_features"]


class CategorySpecificLinear(nn.Module):
    """``y = x @ W[e] + b[e]`` per sample; ``W`` is stored ``[num_embodiments, in, out]`` (transposed relative to
    ``nn.Linear``), as in the checkpoints."""

    def __init__(self, num_embodiments: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.W = nn.Parameter(0.02 * torch.randn(num_embodiments, in_dim, out_dim))
        self.b = nn.Parameter(torch.zeros(num_embodiments, out_dim))

    def forward(self, x: torch.Tensor, embodiment_id: torch.Tensor) -> torch.Tensor:
        """``x`` [B, T, in], ``embodiment_id`` int64 [B] -> [B, T, out]."""
        return torch.bmm(x, self.W[embodiment_id]) + self.b[embodiment_id].unsqueeze(1)


class CategorySpecificMLP(nn.Module):
    """Two category-specific layers with a ReLU between them (state encoder, action decoder)."""

    def __init__(self, num_embodiments: int, in_dim: int, hidden_dim: int, out_dim: int) -> None:
        super().__init__()
        self.layer1 = CategorySpecificLinear(num_embodiments, in_dim, hidden_dim)
        self.layer2 = CategorySpecificLinear(num_embodiments, hidden_dim, out_dim)

    def forward(self, x: torch.Tensor, embodiment_id: torch.Tensor) -> torch.Tensor:
        return self.layer2(F.relu(self.layer1(x, embodiment_id)), embodiment_id)


def time_features(buckets: torch.Tensor, width: int) -> torch.Tensor:
    """``[sin(bucket f_k) | cos(bucket f_k)]`` (sin first), ``f_k = exp(-k ln(10000) / (width / 2))``.

    ``buckets`` [B, T] -> [B, T, width], float32, with the reference's operation order (the log of 10000 is a
    float32 tensor), so that it matches to the last bit at buckets up to 1000.
    """
    half = width // 2
    exponent = -torch.arange(half, dtype=torch.float32, device=buckets.device) * (
        torch.log(torch.tensor(10000.0)) / half)
    freqs = buckets.float().unsqueeze(-1) * exponent.exp()
    return torch.cat([torch.sin(freqs), torch.cos(freqs)], dim=-1)


def _swish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


class MultiEmbodimentActionEncoder(nn.Module):
    """``W3(swish(W2([W1(x_t) | time_features(bucket)])))``, all category-specific."""

    def __init__(self, action_dim: int, width: int, num_embodiments: int) -> None:
        super().__init__()
        self.width = width
        self.W1 = CategorySpecificLinear(num_embodiments, action_dim, width)
        self.W2 = CategorySpecificLinear(num_embodiments, 2 * width, width)
        self.W3 = CategorySpecificLinear(num_embodiments, width, width)

    def forward(self, actions: torch.Tensor, buckets: torch.Tensor, embodiment_id: torch.Tensor) -> torch.Tensor:
        """``actions`` [B, H, A], ``buckets`` int64 [B] -> [B, H, D]."""
        embedded = self.W1(actions, embodiment_id)
        times = time_features(buckets[:, None].expand(-1, actions.shape[1]), self.width).to(embedded.dtype)
        return self.W3(_swish(self.W2(torch.cat([embedded, times], dim=-1), embodiment_id)), embodiment_id)


def masked_flow_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sum((pred - target)^2 mask) / (sum(mask) + 1e-6), per-element masked loss)`` in float32."""
    elements = F.mse_loss(pred.float(), target.float(), reduction="none") * mask.float()
    return elements.sum() / (mask.float().sum() + 1e-6), elements


@attrs.frozen
class ActionHeadInputs:
    """What the head reads besides the noisy actions.

    Attributes:
        features: backbone features [B, L, C] (layer select_layer of the language model).
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


class GrootActionHead(nn.Module):
    """The flow-matching action head (parameter names as in GR00T / lerobot checkpoints under ``action_head.``)."""

    def __init__(self, config: GrootModelConfig) -> None:
        super().__init__()
        self.config = config
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
        self.vl_self_attention = SelfAttentionStack(num_layers=config.vl_num_layers, num_heads=config.vl_num_heads,
                                                    head_dim=config.vl_head_dim, dropout=config.dropout)
        self.position_embedding = nn.Embedding(config.max_seq_len, config.input_embedding_dim)
        nn.init.normal_(self.position_embedding.weight, mean=0.0, std=0.02)

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute DiT and VL self-attention blocks in backward."""
        self.model.gradient_checkpointing = enabled
        self.vl_self_attention.gradient_checkpointing = enabled

    # ------------------------------------------------------------------ pieces
    def encode_context(self, features: torch.Tensor) -> torch.Tensor:
        """``vl_self_attention(vlln(features))``: what the DiT cross-attends to."""
        return self.vl_self_attention(self.vlln(features))

    def encode_state(self, state: torch.Tensor, embodiment_id: torch.Tensor) -> torch.Tensor:
        """The state token [B, 1, D] from the state [B, 1, S]."""
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

    # ------------------------------------------------------------------ objective and sampling
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
