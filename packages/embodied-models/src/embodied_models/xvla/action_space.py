"""X-VLA action spaces in torch: preprocessing before the network, the loss dict and sampling's postprocessing.

The layouts (widths, gripper channels, loss terms) are data in :mod:`embodied_models.xvla.layouts`; this module
applies one to tensors ``[B, T, D]`` the way lerobot's ``action_hub.py`` does. Every operation is out of place.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from embodied_models.xvla.layouts import ActionLayout, LossTerm

__all__ = ["ActionSpace"]


def _elements(kind: str, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if kind == "bce":
        return F.binary_cross_entropy_with_logits(pred, target, reduction="none")
    return (pred - target) ** 2


class ActionSpace:
    """One action layout applied to tensors.

    Args:
        layout: the space (see :func:`embodied_models.xvla.layouts.layout_for`).
    """

    def __init__(self, layout: ActionLayout) -> None:
        self.layout = layout
        self.name = layout.name
        self.dim_action = layout.dim_action
        self.real_dim = layout.real_dim
        self._zeroed = list(layout.zeroed)
        self._sigmoid = list(layout.sigmoid)

    def preprocess(self, proprio: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The network's state and noisy-action inputs: the space's gripper channels of both set to 0."""
        if not self._zeroed:
            return proprio, action
        proprio, action = proprio.clone(), action.clone()
        if proprio.shape[-1]:
            proprio[..., self._zeroed] = 0.0
        action[..., self._zeroed] = 0.0
        return proprio, action

    def _term(self, term: LossTerm, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        parts = [_elements(term.kind, pred[..., list(group)], target[..., list(group)]).mean() for group in term.groups]
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        if term.average:
            total = total / len(term.groups)
        return total * term.scale

    def losses(self, pred: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        """The loss dict (scalars, in the reference's order) of a clean-action prediction against its target.

        Both are ``[B, T, dim_action]``; targets are zero beyond the dataset's action width.
        """
        if pred.shape != target.shape or pred.shape[-1] != self.dim_action:
            raise ValueError(f"{self.name}: prediction {tuple(pred.shape)} and target {tuple(target.shape)} must both "
                             f"be [B, T, {self.dim_action}]")
        return {term.name: self._term(term, pred.float(), target.float()) for term in self.layout.terms}

    def elementwise(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Per-element loss before its mean and scale (squared error or BCE), 0 on channels in no term."""
        out = torch.zeros_like(pred, dtype=torch.float32)
        for term in self.layout.terms:
            channels = list(term.channels())
            out[..., channels] = _elements(term.kind, pred[..., channels].float(), target[..., channels].float())
        return out

    def activate(self, actions: torch.Tensor) -> torch.Tensor:
        """Sampling's gripper sigmoid, keeping every model channel ``[B, T, dim_action]``; the reference's
        postprocess is this followed by ``[..., :real_dim]``."""
        if not self._sigmoid:
            return actions
        actions = actions.clone()
        actions[..., self._sigmoid] = torch.sigmoid(actions[..., self._sigmoid])
        return actions
