"""``embodied eval CHECKPOINT --offline DATASET``: open-loop action error on held-out episodes of a LeRobot dataset.

For every ``stride``-th frame of the chosen episodes the policy gets the recorded observation and predicts a
chunk; it is compared with the recorded next ``H`` actions (steps past the episode end are left out). Reported:
MSE and L1 per horizon step, per action dimension and overall, in dataset units; ``offline_eval.png`` plots them.
The policy is reset at the start of every episode, and frames are fed in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embodied_core.errors import UsageError
from embodied_eval.report import write_json

__all__ = ["HELD_OUT_FRACTION", "default_episodes", "offline_eval"]

HELD_OUT_FRACTION = 0.2
"""Without ``--offline-episodes``, the last 20% of the dataset's episodes (at least one) are evaluated."""


def default_episodes(episodes: Sequence[int]) -> list[int]:
    """The last :data:`HELD_OUT_FRACTION` of ``episodes`` (at least one)."""
    ordered = sorted(episodes)
    count = max(1, round(len(ordered) * HELD_OUT_FRACTION))
    return ordered[-count:]


def _check_keys(metadata: Any, features: dict[str, Any], root: Path) -> None:
    wanted = [*metadata.camera_keys, metadata.state_key, metadata.action_key]
    missing = [key for key in wanted if key not in features]
    if missing:
        raise UsageError(f"{root} lacks {', '.join(missing)}, which the policy reads or predicts "
                         f"(dataset features: {', '.join(features)})")
    for key, dim in ((metadata.state_key, metadata.state_dim), (metadata.action_key, metadata.action_dim)):
        shape = tuple(features[key].shape)
        if shape != (dim,):
            raise UsageError(f"{root}: {key} has shape {list(shape)}, the policy's is [{dim}]")


def _observation(sample: dict[str, Any], metadata: Any) -> dict[str, Any]:
    obs: dict[str, Any] = {key: sample[key].numpy() for key in metadata.camera_keys}
    obs[metadata.state_key] = sample[metadata.state_key].numpy().astype(np.float32)
    if metadata.needs_task:
        obs["task"] = sample["task"]
    return obs


def offline_eval(checkpoint: str | Path, dataset: str | Path, *, output_dir: str | Path,
                 episodes: Sequence[int] | None = None, stride: int = 1, device: str = "cpu", seed: int = 0,
                 video_backend: str = "pyav", allow_external_references: bool = False) -> dict[str, Any]:
    """Open-loop evaluation; writes ``offline_eval.json`` and ``offline_eval.png`` and returns the json document."""
    from embodied_data.lerobot.metadata import LeRobotMeta

    if stride < 1:
        raise UsageError(f"--offline-stride must be >= 1 (got {stride})")
    root = Path(dataset)
    meta = LeRobotMeta.load(root)
    chosen = sorted(set(episodes)) if episodes is not None else default_episodes(list(meta.episodes))
    unknown = sorted(set(chosen) - set(meta.episodes))
    if unknown:
        raise UsageError(f"--offline-episodes {unknown} are not in {root} ({len(meta.episodes)} episodes)")

    from embodied_core import load_policy
    from embodied_data.lerobot.dataset import LeRobotDataset

    policy = load_policy(checkpoint, device=device, seed=seed, allow_external_references=allow_external_references)
    metadata = policy.metadata
    _check_keys(metadata, dict(meta.features), root)
    horizon = metadata.action_horizon
    data = LeRobotDataset(root, episodes=chosen, camera_keys=list(metadata.camera_keys), video_backend=video_backend,
                          delta_timestamps={metadata.action_key: [k / meta.fps for k in range(horizon)]}, meta=meta)

    squared = np.zeros((horizon, metadata.action_dim))
    absolute = np.zeros((horizon, metadata.action_dim))
    counts = np.zeros(horizon)
    frames = 0
    for start, end in data.episode_ranges():
        policy.reset()
        for position in range(start, end, stride):
            sample = data[position]
            predicted = np.asarray(policy.predict_action(_observation(sample, metadata)), dtype=np.float64)
            target = sample[metadata.action_key].numpy().astype(np.float64)
            valid = ~sample[f"{metadata.action_key}_is_pad"].numpy().astype(bool)
            error = (predicted - target)[valid]
            squared[valid] += error**2
            absolute[valid] += np.abs(error)
            counts[valid] += 1
            frames += 1
    per_step_dim_mse = squared / counts[:, None]
    per_step_dim_l1 = absolute / counts[:, None]
    total = counts.sum()
    names = list(metadata.action_names or [f"dim_{i}" for i in range(metadata.action_dim)])
    document = {
        "checkpoint": metadata.to_dict(),
        "dataset": {"root": str(root), "version": meta.version, "episodes": chosen,
                    "episodes_rule": "given" if episodes is not None else f"last {HELD_OUT_FRACTION:.0%}",
                    "frames_evaluated": frames, "stride": stride, "fps": meta.fps},
        "mse": float(squared.sum() / (total * metadata.action_dim)),
        "l1": float(absolute.sum() / (total * metadata.action_dim)),
        "mse_per_step": per_step_dim_mse.mean(axis=1).tolist(),
        "l1_per_step": per_step_dim_l1.mean(axis=1).tolist(),
        "mse_per_dim": dict(zip(names, (squared.sum(axis=0) / total).tolist(), strict=True)),
        "l1_per_dim": dict(zip(names, (absolute.sum(axis=0) / total).tolist(), strict=True)),
        "samples_per_step": counts.astype(int).tolist(),
    }
    output_dir = Path(output_dir)
    write_json(output_dir / "offline_eval.json", document)
    _plot(output_dir / "offline_eval.png", document, title=f"{metadata.model_name} on {root.name}")
    return document


def _plot(path: Path, document: dict[str, Any], *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (per_step, per_dim) = plt.subplots(1, 2, figsize=(10, 3.8))
    steps = np.arange(len(document["mse_per_step"]))
    per_step.plot(steps, document["mse_per_step"], marker="o", label="MSE")
    per_step.plot(steps, document["l1_per_step"], marker="s", label="L1")
    per_step.set_xlabel("horizon step")
    per_step.set_ylabel("error (dataset units)")
    per_step.set_title("per horizon step")
    per_step.legend()
    names = list(document["mse_per_dim"])
    x = np.arange(len(names))
    per_dim.bar(x - 0.2, list(document["mse_per_dim"].values()), width=0.4, label="MSE")
    per_dim.bar(x + 0.2, list(document["l1_per_dim"].values()), width=0.4, label="L1")
    per_dim.set_xticks(x, names, rotation=45 if len(names) > 8 else 0)
    per_dim.set_title("per action dimension")
    per_dim.legend()
    fig.suptitle(f"{title}: open-loop, {document['dataset']['frames_evaluated']} frames")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
