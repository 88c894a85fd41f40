"""What the GR00T model plugins (N1.6 and N1.7) do the same way around their backbone and action head.

:class:`GrootModel` is an :class:`~embodied_core.model_base.EmbodiedModel` holding ``config``, ``backbone``,
``action_head`` (a :class:`~embodied_models.groot.head.FlowMatchingHead`) and ``draws`` (the
:class:`~embodied_models.groot.draws.DrawStream` the port's trainer seeds and checkpoints). A port builds those four
and says how its backbone reads a batch (:meth:`GrootModel.backbone_features`); the rest is here: the generator
members the trainer calls, the weight-decay exemptions, the buffers rebuilt after meta init, the per-forward draws,
the training terms, the loss and Euler sampling.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import torch
from torch import nn

from embodied_core.model_api import ModelOutput
from embodied_core.model_base import EmbodiedModel
from embodied_models.groot.draws import DrawStream, FlowDraws
from embodied_models.groot.head import ActionHeadInputs

__all__ = ["DIT_LORA_TARGETS", "LLM_PROJECTIONS", "GrootModel"]

DIT_LORA_TARGETS = tuple(f"action_head.model.transformer_blocks.*.{name}" for name in (
    "attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0", "ff.net.0.proj", "ff.net.2"))
"""The DiT blocks' attention and FFN projections, every GR00T port's default LoRA targets."""
LLM_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                   "mlp.up_proj", "mlp.down_proj")
"""The attention and MLP projections of a (Qwen3 / Qwen3-VL) language layer, the backbone's LoRA targets."""


class GrootModel(EmbodiedModel, abc.ABC):
    """Base class of the GR00T models (``backbone.*`` + ``action_head.*``); see the module docstring.

    Subclasses set ``config`` (``action_horizon``, ``max_action_dim``, the flow constants, ``state_dropout_prob``,
    ``num_inference_steps``), ``backbone``, ``action_head`` and ``draws`` in ``__init__``, and implement
    :meth:`backbone_features`.
    """

    config: Any
    backbone: nn.Module
    action_head: Any
    draws: DrawStream

    state_dropout: ClassVar[bool] = True
    """Whether the draws' state-dropout flags reach the head (False: the port has no state dropout, N1.6)."""

    def check_sizes(self, label: str, problems: list[str]) -> None:
        """Raises ValueError ``"<label> sizes: ..."`` listing every problem (nothing when there is none)."""
        if problems:
            raise ValueError(f"{label} sizes: " + "; ".join(problems))

    # ------------------------------------------------------------------ RNG the trainer manages
    def seed_rng(self, seed: int, *, rank: int = 0) -> None:
        """Seeds the generator every training draw goes through (the same ``seed`` on every rank)."""
        self.draws.seed(seed, rank=rank)

    def rng_state(self) -> torch.Tensor:
        """The generator state (a uint8 tensor)."""
        return self.draws.state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        """Restores :meth:`rng_state`."""
        self.draws.set_state(state)

    # ------------------------------------------------------------------ protocol members
    def no_weight_decay(self) -> frozenset[str]:
        """The embodiment tables' biases (``.b``, 2-D, so not caught by the bias rule) and the action positions."""
        return frozenset(name for name, p in self.named_parameters()
                         if p.requires_grad and (name.endswith(".b") or "position_embedding" in name))

    @torch.no_grad()
    def init_non_persistent_buffers(self) -> None:
        """Recomputes buffers that are not in the state dict (after building on the meta device + to_empty)."""
        self.backbone.init_non_persistent_buffers()

    # ------------------------------------------------------------------ forward
    @abc.abstractmethod
    def backbone_features(self, batch: Any) -> torch.Tensor:
        """Backbone features [B, L, llm_width] of a batch (each port's backbone call)."""

    def head_inputs(self, batch: Any) -> ActionHeadInputs:
        """Backbone features and the head's other inputs."""
        return self.head_inputs_from(self.backbone_features(batch), batch.attention_mask, batch.image_mask,
                                     batch.state, batch.embodiment_id)

    @staticmethod
    def head_inputs_from(features: torch.Tensor, attention_mask: torch.Tensor, image_mask: torch.Tensor,
                         state: torch.Tensor, embodiment_id: torch.Tensor) -> ActionHeadInputs:
        """The head's inputs from backbone features (the state cast to their dtype)."""
        return ActionHeadInputs(features=features, attention_mask=attention_mask, image_mask=image_mask,
                                state=state.to(features.dtype), embodiment_id=embodiment_id)

    def draw(self, batch: Any) -> FlowDraws:
        """This forward's noise, time and state-dropout draws (state dropout only in training mode, at
        ``model.state_dropout_prob``; N1.6's is always 0.0)."""
        cfg = self.config
        return self.draws.draw(batch.sample_index, batch.batch_size, (cfg.action_horizon, cfg.max_action_dim),
                               alpha=cfg.noise_beta_alpha, beta=cfg.noise_beta_beta, noise_s=cfg.noise_s,
                               state_dropout_prob=cfg.state_dropout_prob if self.training else 0.0)

    def training_terms(self, batch: Any, draws: FlowDraws | None = None) -> dict[str, torch.Tensor]:
        """Loss and intermediates (see FlowMatchingHead.training_terms); draws from the generator unless given (their
        state-dropout flags zero the state token when the port has :attr:`state_dropout`)."""
        if batch.actions is None or batch.action_mask is None:
            raise ValueError("the batch has no actions; training needs them (inference: sample_actions)")
        draws = (draws if draws is not None else self.draw(batch)).to(batch.actions.device)
        inputs = self.head_inputs(batch)
        actions = batch.actions.to(inputs.features.dtype)
        drop_state = draws.drop_state if self.state_dropout else None
        return self.action_head.training_terms(inputs, actions, batch.action_mask, noise=draws.noise.to(actions.dtype),
                                               t=draws.t, drop_state=drop_state)

    def forward(self, batch: Any) -> ModelOutput:
        """Training loss ``sum(MSE * action_mask) / (sum(action_mask) + 1e-6)`` (no host sync)."""
        return ModelOutput(loss=self.training_terms(batch)["loss"], metrics={})

    @torch.no_grad()
    def sample_actions(self, batch: Any, noise: torch.Tensor | None = None,
                       num_steps: int | None = None) -> torch.Tensor:
        """Normalized actions [B, model.action_horizon, model.max_action_dim] (``noise`` from torch's RNG unless
        given); the transforms' postprocess_actions keeps the data horizon and dims and unnormalizes."""
        cfg = self.config
        inputs = self.head_inputs(batch)
        if noise is None:
            noise = torch.randn(batch.batch_size, cfg.action_horizon, cfg.max_action_dim, device=batch.state.device)
        x = self.action_head.sample(inputs, noise.to(inputs.features.dtype), num_steps or cfg.num_inference_steps)
        return x.float()
