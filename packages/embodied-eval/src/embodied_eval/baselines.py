"""Reference policies a trained one must beat, measured by the same evaluator (``embodied eval --baselines``).

- ``hold``: commands the current state, so the robot stays where it is (environments whose action is an
  absolute position target with the state's layout: synth_reach, pusht, ALOHA).
- ``mean_action``: always the training data's mean action (from the policy folder's statistics): the best
  constant guess, what a policy that ignored its observations would learn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import UsageError
from embodied_core.protocols import PolicyMetadata

__all__ = ["BASELINES", "HoldPolicy", "MeanActionPolicy", "make_baseline"]

BASELINES = ("hold", "mean_action")


class HoldPolicy:
    """Returns the observed state as a one-step chunk."""

    def __init__(self, metadata: PolicyMetadata) -> None:
        if metadata.state_dim != metadata.action_dim:
            raise UsageError(f"the hold baseline commands the current state, but state has {metadata.state_dim} "
                             f"dims and actions {metadata.action_dim}")
        self.metadata = attrs.evolve(metadata, model_name="baseline:hold", action_horizon=1)

    def predict_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """``[[state]]``."""
        return np.asarray(observation[self.metadata.state_key], dtype=np.float32).reshape(1, -1)

    def reset(self) -> None:
        """Nothing to reset."""


class MeanActionPolicy:
    """Returns a fixed action (the data's mean) as a one-step chunk."""

    def __init__(self, metadata: PolicyMetadata, mean_action: np.ndarray) -> None:
        mean_action = np.asarray(mean_action, dtype=np.float32).reshape(-1)
        if mean_action.shape != (metadata.action_dim,):
            raise UsageError(f"mean action has {mean_action.size} dims, the environment takes {metadata.action_dim}")
        self.metadata = attrs.evolve(metadata, model_name="baseline:mean_action", action_horizon=1)
        self.mean_action = mean_action

    def predict_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """``[[mean action]]``."""
        return self.mean_action[None].copy()

    def reset(self) -> None:
        """Nothing to reset."""


def mean_action_of(checkpoint: str, action_key: str) -> np.ndarray:
    """The mean action training used, from the policy folder's ``stats.safetensors``."""
    from embodied_core.policy import read_policy_folder

    stats = read_policy_folder(checkpoint).stats
    if action_key not in stats or "mean" not in stats[action_key]:
        raise UsageError(f"{checkpoint}: its statistics have no mean of {action_key!r} (keys: "
                         f"{', '.join(stats) or 'none'}); the mean_action baseline needs it")
    return np.asarray(stats[action_key]["mean"], dtype=np.float32)


def make_baseline(name: str, metadata: PolicyMetadata, *, checkpoint: str | None) -> Any:
    """The baseline ``name`` for an environment whose layout ``metadata`` describes."""
    if name == "hold":
        return HoldPolicy(metadata)
    if name == "mean_action":
        if not checkpoint:
            raise UsageError("the mean_action baseline reads the training statistics of a local checkpoint; "
                             "give CHECKPOINT (with --server, the served checkpoint must be readable here)")
        return MeanActionPolicy(metadata, mean_action_of(checkpoint, metadata.action_key))
    raise UsageError(f"unknown baseline {name!r}; valid: {', '.join(BASELINES)}")
