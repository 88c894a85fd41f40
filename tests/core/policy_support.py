"""Helpers of the policy tests: train a few steps keeping the training-time objects, turn a dataset sample into a
robot-style observation, run ``load_policy`` in a fresh process, and compute the training path's actions."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodied_core import hookimpl
from embodied_core.trainer.api import Trainer
from tests.support import REPO_ROOT, clean_env


class KeepTrainingObjects:
    """Hook keeping, at the end of training, the trained model and the transforms training used."""

    def __init__(self) -> None:
        self.trainer: Any = None
        self.model: Any = None
        self.transforms: Any = None

    @hookimpl
    def on_train_end(self, step: int, output_dir: str, summary: dict[str, Any]) -> None:
        self.model = self.trainer.strategy.unwrap_model(self.trainer.model).eval()
        self.transforms = self.trainer.transforms


def train(config: Mapping[str, Any]) -> tuple[Any, KeepTrainingObjects]:
    """Trains ``config`` (``{"training": ..., "model": ..., "data": ...}``); returns the trainer and kept objects."""
    kept = KeepTrainingObjects()
    trainer = Trainer(dict(config), plugins=(kept,)).build()
    kept.trainer = trainer
    trainer.train()
    return trainer, kept


def observation_from_sample(sample: Mapping[str, Any], camera_keys: Sequence[str], state_key: str, *,
                            task: bool = True) -> dict[str, Any]:
    """A dataset sample as a robot sends it: uint8 HWC numpy frames, a float32 numpy state, the task string."""
    obs: dict[str, Any] = {}
    for key in camera_keys:
        frame = torch.as_tensor(sample[key])
        frame = frame[-1] if frame.ndim == 4 else frame
        obs[key] = frame.permute(1, 2, 0).numpy().copy()
    obs[state_key] = torch.as_tensor(sample[state_key]).reshape(-1).numpy().astype(np.float32)
    if task:
        obs["task"] = sample["task"]
    return obs


@torch.no_grad()
def training_path_actions(model: Any, transforms: Any, samples: Sequence[Mapping[str, Any]], *,
                          seed: int) -> list[np.ndarray]:
    """Training's sample transform + collate on each dataset sample, ``sample_actions`` drawing from the global RNG
    seeded once with ``seed`` (a policy's stream continues across calls too), then the transforms'
    postprocessing: float32 ``[H, action_dim]`` per sample."""
    torch.manual_seed(seed)
    out = []
    for sample in samples:
        transformed = transforms.sample_transform(dict(sample)) if transforms.sample_transform else dict(sample)
        actions = model.sample_actions(transforms.collate_fn([transformed]))
        if transforms.postprocess_actions is not None:
            actions = transforms.postprocess_actions(actions)
        out.append(actions[0].float().numpy())
    return out


_FRESH_PROCESS = r"""
import json, sys
import numpy as np
from embodied_core import load_policy

path, obs_file, out_file, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
policy = load_policy(path, seed=seed)
with np.load(obs_file) as data:
    count = int(data["count"])
    steps = [{k.split("|", 1)[1]: (str(v) if v.dtype.kind == "U" else v) for k, v in data.items()
              if k.startswith(f"{i}|")} for i in range(count)]
actions = [policy.predict_action(obs) for obs in steps]
np.savez(out_file, *actions)
print(json.dumps(policy.metadata.to_dict()))
"""


def predict_in_fresh_process(path: Path, observations: Sequence[Mapping[str, Any]], work: Path, *,
                             seed: int = 0) -> tuple[list[np.ndarray], dict[str, Any]]:
    """``load_policy(path, seed=seed)`` in a new Python process fed ``observations`` in order; returns its actions
    and its metadata."""
    work.mkdir(parents=True, exist_ok=True)
    arrays = {"count": np.asarray(len(observations))}
    for i, obs in enumerate(observations):
        arrays.update({f"{i}|{k}": np.asarray(v) for k, v in obs.items()})
    np.savez(work / "obs.npz", **arrays)
    proc = subprocess.run([sys.executable, "-c", _FRESH_PROCESS, str(path), str(work / "obs.npz"),
                           str(work / "actions.npz"), str(seed)], capture_output=True, text=True, env=clean_env(),
                          cwd=REPO_ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(work / "actions.npz") as data:
        actions = [data[f"arr_{i}"] for i in range(len(observations))]
    return actions, json.loads(proc.stdout.strip().splitlines()[-1])
