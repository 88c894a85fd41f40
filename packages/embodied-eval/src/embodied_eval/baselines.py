"""Reference policies a trained one must beat, measured by the same evaluator (``embodied eval --baselines``).

- ``hold``: keeps the robot where it is, with the action the env declares for that
  (:meth:`~embodied_eval.envs.base.EvalEnv.hold_action_for`): the current state where actions are absolute
  position targets in the state's layout (synth_reach, pusht, ALOHA); no motion and the gripper command that
  keeps its opening where actions are motions (metaworld).
- ``mean_action``: always the training data's mean action (from the policy folder's statistics): the best
  constant guess, what a policy that ignored its observations would learn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import UsageError
from embodied_core.protocols import PolicyMetadata

__all__ = ["BASELINES", "HoldPolicy", "MeanActionPolicy", "make_baseline"]

BASELINES = ("hold", "mean_action")


def _absolute_hold(state: np.ndarray) -> np.ndarray:
    return np.asarray(state, dtype=np.float32).reshape(-1)


class HoldPolicy:
    """Returns the action that keeps the robot still in the observed state, as a one-step chunk.

    Args:
        metadata: the env's layout.
        hold: ``state -> action`` of the env (``EvalEnv.hold_action_for``); None: absolute control, the state.
    """

    def __init__(self, metadata: PolicyMetadata, hold: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        if hold is None and metadata.state_dim != metadata.action_dim:
            raise UsageError(f"the hold baseline commands the current state, but state has {metadata.state_dim} "
                             f"dims and actions {metadata.action_dim}")
        self.metadata = attrs.evolve(metadata, model_name="baseline:hold", action_horizon=1)
        self._hold = hold or _absolute_hold
        # The env's rule runs once here, so a layout it cannot hold (its UsageError) stops before any rollout.
        probe = np.asarray(self._hold(np.zeros(metadata.state_dim, np.float32))).reshape(-1)
        if probe.shape != (metadata.action_dim,):
            raise UsageError(f"the hold baseline's action has {probe.size} values, the env takes "
                             f"{metadata.action_dim}")

    def predict_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """``[[hold action of the observed state]]``."""
        state = np.asarray(observation[self.metadata.state_key], dtype=np.float32)
        return np.asarray(self._hold(state), dtype=np.float32).reshape(1, -1)

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


def mean_action_of(checkpoint: str, action_key: str, *, allow_external_references: bool = False) -> np.ndarray:
    """The mean action training used, from the policy folder's ``stats.safetensors``."""
    from embodied_core.policy import read_policy_folder

    stats = read_policy_folder(checkpoint, allow_external_references=allow_external_references).stats
    if action_key not in stats or "mean" not in stats[action_key]:
        raise UsageError(f"{checkpoint}: its statistics have no mean of {action_key!r} (keys: "
                         f"{', '.join(stats) or 'none'}); the mean_action baseline needs it")
    return np.asarray(stats[action_key]["mean"], dtype=np.float32)


def make_baseline(name: str, metadata: PolicyMetadata, *, checkpoint: str | None,
                  hold: Callable[[np.ndarray], np.ndarray] | None = None,
                  allow_external_references: bool = False) -> Any:
    """The baseline ``name`` for an environment whose layout ``metadata`` describes (``hold``: its
    ``state -> action`` that keeps the robot still; None: the state itself)."""
    if name == "hold":
        return HoldPolicy(metadata, hold)
    if name == "mean_action":
        if not checkpoint:
            raise UsageError("the mean_action baseline reads the training statistics of a local checkpoint; "
                             "give CHECKPOINT (with --server, the served checkpoint must be readable here)")
        return MeanActionPolicy(metadata, mean_action_of(checkpoint, metadata.action_key,
                                                         allow_external_references=allow_external_references))
    raise UsageError(f"unknown baseline {name!r}; valid: {', '.join(BASELINES)}")
