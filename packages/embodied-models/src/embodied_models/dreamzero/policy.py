"""DreamZero as a policy: core's transforms policy plus absolute actions for relative action parts.

With ``data.relative_action`` the strategy trains each chunk's actions relative to the chunk's anchor state (the
parts named in ``data.relative_action_keys``, by default every action part without "gripper" that has a state
part of the same name). One ``predict_action`` predicts one chunk anchored at the observed state, so that state is
added back to those dimensions. Parts are found from the dimension names of the strategy's ``state`` / ``action``
features (``<part>_<i>``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from embodied_core.policy.runtime import TransformsPolicy

if TYPE_CHECKING:
    from embodied_core.policy.load import PolicyFolder

__all__ = ["DreamZeroPolicy", "relative_pairs"]


def _part(name: str) -> str:
    return name.rsplit("_", 1)[0] if "_" in name else name


def relative_pairs(data_config: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(action dims, state dims)`` of the relative parts (empty when ``data.relative_action`` is off)."""
    if not getattr(data_config, "relative_action", False):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    actions: Sequence[str] = data_config.action_names or ()
    states: Sequence[str] = data_config.state_names or ()
    keys = data_config.relative_action_keys
    state_index = {name: i for i, name in enumerate(states)}
    pairs = [(i, state_index[name]) for i, name in enumerate(actions)
             if name in state_index and (_part(name) in keys if keys is not None else "gripper" not in _part(name))]
    return (np.array([a for a, _ in pairs], dtype=np.int64), np.array([s for _, s in pairs], dtype=np.int64))


class DreamZeroPolicy(TransformsPolicy):
    """:class:`TransformsPolicy` whose relative action dimensions come back absolute (module doc)."""

    relative: tuple[np.ndarray, np.ndarray] = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    @classmethod
    def references(cls, doc: dict[str, Any]) -> dict[str, str]:
        """The frozen encoders' folders the model is built from (their ``config.json``), when set: read as given
        (relative to the working directory), and a value that is no folder here would be taken as a hub id."""
        model = doc.get("model_config") or {}
        refs = {}
        for name in ("vae_path", "text_encoder_path", "image_encoder_path"):
            if model.get(name):
                local = Path(str(model[name])).expanduser()
                on_disk = local.is_absolute() or local.exists()
                refs[f"policy.json model_config.{name}"] = str(local.resolve()) if on_disk else f"hub:{model[name]}"
        return refs

    @classmethod
    def from_folder(cls, folder: PolicyFolder, *, device: str, seed: int) -> DreamZeroPolicy:
        """The transforms policy of ``folder`` plus its relative action parts."""
        policy = super().from_folder(folder, device=device, seed=seed)
        policy.relative = relative_pairs(folder.data_config)
        return policy

    def predict_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """Raw observation -> float32 ``[action_horizon, action_dim]`` absolute actions in dataset units."""
        actions = super().predict_action(observation)
        action_dims, state_dims = self.relative
        if action_dims.size:
            state = np.asarray(observation[self.metadata.state_key], dtype=np.float32).reshape(-1)
            actions[:, action_dims] += state[state_dims]
        return actions
