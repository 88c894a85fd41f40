"""Is the synthetic reaching task learnable? Trains policies on ``embodied data synth`` output and compares
their action chunks on held-out episodes (another seed) with baselines.

    python benchmarks/synth_policy.py [--iters 1000] [--episodes 20] [--workdir DIR] [--skip-flow]

Prints the mean squared error (workspace units, non-padded actions of 8-step chunks) of:
- ``hold``: the arm stays where it is (every action = current state);
- ``mean``: the training set's mean action;
- ``cnn``: a small CNN regressor (image + state -> chunk offsets), trained here with MSE for 150 steps:
  a reference that only the camera can make better than ``hold``;
- ``tiny_flow_policy``: the plugin-template model trained with ``embodied``'s Trainer for ``--iters``.
A policy that perceives the target approaches the error of following the current target exactly
(about 0.016 with the default task: targets jump to new places, so the future is not fully predictable).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import attrs
import torch
from safetensors.torch import load_file
from torch import nn

from embodied_core import registry
from embodied_core.checkpoint import find_latest
from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.model_api import collate_samples
from embodied_core.registry import groups
from embodied_core.trainer.api import Trainer
from embodied_data.synth import SynthConfig, write_synthetic_dataset

HORIZON = 8
CAMERA = "observation.images.front"


def _load(root: Path, data_config: BaseDataConfig) -> dict[str, torch.Tensor]:
    build = registry.load_factory(groups.DATASET_FORMATS, "lerobot_datasets")
    dataset = build(attrs.evolve(TrainingArgs(), dataset_path=str(root)), data_config)
    return collate_samples([dataset[i] for i in range(len(dataset))])


def _mse(prediction: torch.Tensor, batch: dict[str, torch.Tensor]) -> float:
    error = ((prediction - batch["action"].float()) ** 2).mean(-1)
    return error[~batch["action_is_pad"]].mean().item()


def _train_cnn(train: dict[str, torch.Tensor], steps: int) -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 32, 5, 2, 2), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
                        nn.Conv2d(64, 64, 3, 2, 1), nn.ReLU(), nn.Flatten(), nn.LazyLinear(256), nn.ReLU(),
                        nn.Linear(256, HORIZON * 2))
    images, state = train[CAMERA].float() / 255, train["observation.state"]
    net(images[:1])  # materializes the lazy layer before the optimizer sees the parameters
    optimizer = torch.optim.AdamW(net.parameters(), 1e-3)
    for _ in range(steps):
        idx = torch.randint(0, len(images), (64,))
        prediction = state[idx, None, :] + net(images[idx]).view(-1, HORIZON, 2)
        error = ((prediction - train["action"][idx]) ** 2).mean(-1)
        loss = error[~train["action_is_pad"][idx]].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return net


def _train_flow(work: Path, train_root: Path, iters: int) -> tuple[nn.Module, BaseDataConfig]:
    training = {"model_name": "tiny_flow_policy", "dataset_path": str(train_root), "dtype": "float32",
                "train_iters": iters, "per_device_batch_size": 32, "lr_base": 1e-3, "lr_warmup_iters": 20,
                "num_workers": 1, "log_interval": 100, "save_interval": iters, "output_dir": str(work / "run")}
    trainer = Trainer({"training": training, "data": {"state_dim": 2, "action_dim": 2}})
    checkpoint = find_latest(work / "run" / "checkpoints")
    if checkpoint is None:
        start = time.perf_counter()
        trainer.train()
        print(f"tiny_flow_policy: trained {iters} iterations in {time.perf_counter() - start:.0f}s")
        checkpoint = find_latest(work / "run" / "checkpoints")
    config = trainer.config
    model = registry.get_spec(groups.MODELS, "tiny_flow_policy").load_factory()(config.model, config.data)
    model.load_state_dict(load_file(checkpoint / "model.safetensors"))
    return model.eval(), config.data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=1000, help="tiny_flow_policy training iterations")
    parser.add_argument("--episodes", type=int, default=20, help="training episodes")
    parser.add_argument("--workdir", type=Path, default=None, help="reuses datasets and checkpoint found there")
    parser.add_argument("--skip-flow", action="store_true", help="only the baselines and the CNN reference")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="synth_policy_"))
    train_root, eval_root = work / "train", work / "eval"
    for root, config in ((train_root, SynthConfig(num_episodes=args.episodes, image_size=(64, 64))),
                         (eval_root, SynthConfig(num_episodes=4, image_size=(64, 64), seed=123))):
        if not (root / "meta" / "info.json").is_file():
            write_synthetic_dataset(root, config)
    data_config = BaseDataConfig(camera_keys=[CAMERA], image_size=(64, 64), state_dim=2, action_dim=2,
                                 action_horizon=HORIZON)
    train, held_out = _load(train_root, data_config), _load(eval_root, data_config)
    state = held_out["observation.state"].float()[:, None, :].expand_as(held_out["action"])
    results = {"hold": _mse(state, held_out),
               "mean": _mse(train["action"][:, 0].mean(0).expand_as(held_out["action"]), held_out)}
    start = time.perf_counter()
    cnn = _train_cnn(train, steps=150)
    with torch.no_grad():
        offsets = cnn(held_out[CAMERA].float() / 255).view(-1, HORIZON, 2)
    results["cnn"] = _mse(held_out["observation.state"][:, None, :] + offsets, held_out)
    print(f"cnn: trained 150 steps in {time.perf_counter() - start:.0f}s")
    if not args.skip_flow:
        model, flow_config = _train_flow(work, train_root, args.iters)
        flow_data = _load(eval_root, flow_config)
        noise = torch.randn(flow_data["action"].shape, generator=torch.Generator().manual_seed(0))
        results["tiny_flow_policy"] = _mse(model.sample_actions(flow_data, noise=noise), flow_data)
    for name, value in results.items():
        print(f"{name:<17} action MSE on held-out episodes: {value:.5f}")


if __name__ == "__main__":
    main()
