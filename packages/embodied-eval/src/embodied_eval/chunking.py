"""From action chunks to one action per control step: receding-horizon replanning and temporal ensembling.

A policy predicts ``[H, action_dim]`` per call. :class:`ChunkedController` calls it every ``replan_steps``
steps and executes the chunk's first ``replan_steps`` actions (openpi's LIBERO loop, ``ActionChunkBroker``).
With ``ensemble_decay`` set, every step's action is instead the weighted mean of what all chunks still covering
that step predicted for it, with weights ``exp(-ensemble_decay * i)`` where ``i = 0`` is the oldest chunk
(ACT's temporal ensembling; ACT queries every step, ``replan_steps=1``, with a decay of 0.01).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["ChunkedController"]


class ChunkedController:
    """Turns a policy's chunks into actions.

    Args:
        policy: anything with ``predict_action(observation) -> [H, D]`` and ``reset()``.
        replan_steps: steps between predictions (1..H).
        ensemble_decay: None for plain chunk execution, else the temporal-ensembling decay (>= 0).
    """

    def __init__(self, policy: Any, *, replan_steps: int, ensemble_decay: float | None = None) -> None:
        horizon = policy.metadata.action_horizon
        if not 1 <= replan_steps <= horizon:
            raise ValueError(f"replan_steps must be in 1..{horizon} (the policy's action horizon), got {replan_steps}")
        if ensemble_decay is not None and ensemble_decay < 0:
            raise ValueError(f"ensemble_decay must be >= 0, got {ensemble_decay}")
        self.policy = policy
        self.replan_steps = replan_steps
        self.ensemble_decay = ensemble_decay
        self.num_predictions = 0
        self._step = 0
        self._chunks: deque[tuple[int, np.ndarray]] = deque()  # (step the chunk starts at, chunk)

    def reset(self) -> None:
        """New episode: forgets the chunks and resets the policy."""
        self.policy.reset()
        self._step = 0
        self._chunks.clear()

    def act(self, observation: Mapping[str, Any]) -> np.ndarray:
        """The action ``[action_dim]`` for the current step (predicts a new chunk when it is time)."""
        if self._step % self.replan_steps == 0:
            chunk = np.asarray(self.policy.predict_action(observation), dtype=np.float32)
            self.num_predictions += 1
            self._chunks.append((self._step, chunk))
        while self._chunks and self._chunks[0][0] + len(self._chunks[0][1]) <= self._step:
            self._chunks.popleft()  # chunks that no longer cover this step
        if self.ensemble_decay is None:
            start, chunk = self._chunks[-1]
            action = chunk[self._step - start]
        else:
            rows = np.stack([chunk[self._step - start] for start, chunk in self._chunks])
            weights = np.exp(-self.ensemble_decay * np.arange(len(rows)))
            action = (weights[:, None] * rows).sum(axis=0) / weights.sum()
        self._step += 1
        return action.astype(np.float32)
