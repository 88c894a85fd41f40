"""Does a policy learn the synthetic reaching task? Trains ``tiny_flow_policy`` on ``embodied data synth``
output and compares its predicted action chunks on held-out episodes with two baselines.

    python benchmarks/synth_policy.py [--iters 400] [--episodes 20] [--workdir DIR]

Prints the mean squared error (workspace units, non-padded actions) of:
- ``hold``: the arm stays where it is (every action = current state);
- ``mean``: the training set's mean action;
- ``policy``: the trained policy's ``sample_actions`` (fixed noise).
A policy that reads the target from the camera beats both by a wide margin.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import attrs
import torch
from safetensors.torch import load_file

from embodied_core import registry
from embodied_core.checkpoint import find_latest
from embodied_core.config.training_args import TrainingArgs
from embodied_core.model_api import collate_samples
from embodied_core.registry import groups
from embodied_core.trainer.api import Trainer
from embodied_data.synth import SynthConfig, write_synthetic_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=400)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--eval-only", action="store_true", help="reuse the datasets and checkpoint in --workdir")
    parser.add_argument("--eval-on", type=Path, default=None, help="evaluate on this dataset instead")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="synth_policy_"))
    train_root, eval_root = work / "train", work / "eval"
    if not args.eval_only:
        write_synthetic_dataset(train_root, SynthConfig(num_episodes=args.episodes, image_size=(64, 64)),
                                overwrite=True)
        write_synthetic_dataset(eval_root, SynthConfig(num_episodes=4, image_size=(64, 64), seed=123),
                                overwrite=True)
    data = {"state_dim": 2, "action_dim": 2}
    training = {"model_name": "tiny_flow_policy", "dataset_path": str(train_root), "dtype": "float32",
                "train_iters": args.iters, "per_device_batch_size": 32, "lr_base": 1e-3, "lr_warmup_iters": 20,
                "num_workers": 1, "log_interval": 100, "save_interval": args.iters, "output_dir": str(work / "run")}
    start = time.perf_counter()
    trainer = Trainer({"training": training, "data": data})
    if not args.eval_only:
        trainer.train()
        print(f"trained {args.iters} iterations in {time.perf_counter() - start:.0f}s")

    config = trainer.config
    spec = registry.get_spec(groups.MODELS, "tiny_flow_policy")
    model = spec.load_factory()(config.model, config.data)
    model.load_state_dict(load_file(find_latest(work / "run" / "checkpoints") / "model.safetensors"))
    model.eval()
    build = registry.load_factory(groups.DATASET_FORMATS, "lerobot_datasets")
    dataset = build(attrs.evolve(TrainingArgs(), dataset_path=str(args.eval_on or eval_root)), config.data)
    train_set = build(attrs.evolve(TrainingArgs(), dataset_path=str(train_root)), config.data)
    mean_action = torch.stack([train_set[i]["action"][0] for i in range(0, len(train_set), 5)]).mean(0)

    errors = {"hold": [], "mean": [], "policy": []}
    generator = torch.Generator().manual_seed(0)
    for first in range(0, len(dataset), 32):
        batch = collate_samples([dataset[i] for i in range(first, min(first + 32, len(dataset)))])
        target, valid = batch["action"].float(), ~batch["action_is_pad"]
        noise = torch.randn(target.shape, generator=generator)
        predictions = {"hold": batch["observation.state"].float()[:, None, :].expand_as(target),
                       "mean": mean_action.expand_as(target), "policy": model.sample_actions(batch, noise=noise)}
        for name, pred in predictions.items():
            errors[name].append(((pred - target) ** 2).mean(-1)[valid])
    for name, parts in errors.items():
        print(f"{name:<7} action MSE on held-out episodes: {torch.cat(parts).mean().item():.5f}")


if __name__ == "__main__":
    main()
