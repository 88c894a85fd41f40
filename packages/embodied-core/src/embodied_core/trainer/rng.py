"""Capture and restore of the Python, NumPy and torch RNG states as checkpoint-safe tensors.

Stored as plain tensors and lists so ``torch.load(weights_only=True)`` reads them back without
unpickling arbitrary objects.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

__all__ = ["RANK_SEED_STRIDE", "capture_rng_state", "rank_seed_offset", "restore_rng_state", "seed_everything"]

RANK_SEED_STRIDE = 1_000_003
"""Distance between the seeds of consecutive ranks under ``--set-seed-by-rank`` (a prime, so the streams of
nearby seeds and ranks do not collide)."""


def seed_everything(seed: int) -> None:
    """Seeds Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rank_seed_offset(rank: int, *, enabled: bool) -> int:
    """What ``--set-seed-by-rank`` adds to ``--seed`` on ``rank`` (0 when it is off)."""
    return rank * RANK_SEED_STRIDE if enabled else 0


def capture_rng_state() -> dict[str, Any]:
    """The RNG states of this process."""
    version, internal, gauss = random.getstate()
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state: dict[str, Any] = {
        "python_version": version,
        "python_state": torch.tensor(internal, dtype=torch.int64),
        "python_gauss": gauss,
        "numpy_kind": np_kind,
        "numpy_keys": torch.from_numpy(np_keys.astype(np.int64)),
        "numpy_pos": int(np_pos),
        "numpy_has_gauss": int(np_has_gauss),
        "numpy_gauss": float(np_gauss),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restores what :func:`capture_rng_state` produced."""
    random.setstate((state["python_version"], tuple(state["python_state"].tolist()), state["python_gauss"]))
    np.random.set_state((state["numpy_kind"], state["numpy_keys"].numpy().astype(np.uint32), state["numpy_pos"],
                         state["numpy_has_gauss"], state["numpy_gauss"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
