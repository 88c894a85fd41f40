"""Request latency of ``embodied serve`` vs a direct ``predict_action`` call, for pi05_tiny and lingbot_va_tiny.

For each model: train 2 steps (pi05_tiny on ``embodied data synth`` output, 96 x 96 frames; lingbot_va_tiny on
``../shared/datasets/lerobot_written/v21`` with its latent cache, as the lingbot_va tests build it), load the
checkpoint in this process and start ``embodied serve`` on it in a child process (same thread count), then
time ``--episodes`` episodes of ``--steps`` requests each, both ways: ``predict_action`` here, and a request
over the websocket (openpi's protocol, through :class:`embodied_eval.RemotePolicy`: pack, send, infer, receive,
unpack). Prints p50/p99 per model and the server's own ``infer_ms``/``queue_ms``; latency includes the
observation's encoding (a 96 x 96 frame: 27 KiB; lingbot_va_tiny's keyframe chunks: 12 frames x 2 cameras).

    .venv/bin/python benchmarks/serve_latency.py [--episodes 10] [--steps 6] [--threads 1] [--models pi05_tiny,...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the lingbot_va fixtures of tests/ build its tiny VAE/text encoder


def _pi05_checkpoint(work: Path) -> tuple[Path, Callable[[], Iterator[dict[str, Any]]]]:
    from embodied_core.trainer.api import Trainer
    from embodied_data.synth import SynthConfig, write_synthetic_dataset
    from tests.eval.serve_support import dataset_observations

    data = work / "synth"
    write_synthetic_dataset(data, SynthConfig(num_episodes=4, min_length=20, max_length=20, seed=0))
    Trainer({"training": {"model_name": "pi05_tiny", "dataset_format": "lerobot_datasets", "dataset_path": str(data),
                          "train_iters": 2, "save_interval": 2, "dtype": "float32", "per_device_batch_size": 2,
                          "num_workers": 0, "lr_warmup_iters": 0, "output_dir": str(work / "pi05")},
             "data": {"state_dim": 2, "action_dim": 2}}).train()
    observations = dataset_observations(data, range(20))

    def episode() -> Iterator[dict[str, Any]]:
        yield from observations

    return work / "pi05" / "checkpoints" / "step_2", episode


def _lingbot_checkpoint(work: Path) -> tuple[Path, Callable[[], Iterator[dict[str, Any]]]]:
    from embodied_core.config.resolve import load_config
    from embodied_models.lingbot_va.precompute import precompute_latents
    from tests.core.policy_support import train
    from tests.models.test_lingbot_va_data import DATASET, _base_model, _config
    from tests.models.test_policy_lingbot_va import TASK, _frames

    base = _base_model(work / "base")
    config = load_config(training={"model_name": "lingbot_va_tiny"}, data={"latent_cache": str(work / "cache")})
    precompute_latents(DATASET, base_model_path=base, data_config=config.data, text_len=config.model.text_len,
                       device="cpu", dtype=torch.float32)
    trainer, _ = train(_config(work, train_iters=2, save_interval=2, output_dir=str(work / "lingbot")))
    cameras = list(trainer.config.data.camera_keys)
    frames = _frames(cameras, 21)

    def episode() -> Iterator[dict[str, Any]]:
        # the closed loop: the first frame, then the keyframes seen while each chunk executed (8, then 12)
        yield {**{c: f[0] for c, f in zip(cameras, frames, strict=True)}, "task": TASK}
        yield {**{c: f[1:9] for c, f in zip(cameras, frames, strict=True)}, "task": TASK}
        while True:
            yield {**{c: f[9:21] for c, f in zip(cameras, frames, strict=True)}, "task": TASK}

    return work / "lingbot" / "checkpoints" / "step_2", episode


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):7.2f} ms  p99 {p99:7.2f} ms"


def _time(policy: Any, episode: Callable[[], Iterator[dict[str, Any]]], *, episodes: int, steps: int,
          timings: list[dict[str, float]] | None = None) -> list[float]:
    out = []
    for _ in range(episodes):
        policy.reset()
        for _, obs in zip(range(steps), episode(), strict=False):
            start = time.perf_counter()
            policy.predict_action(obs)
            out.append((time.perf_counter() - start) * 1000)
            if timings is not None:
                timings.append(policy.last_timing)
    return out


def _serve(checkpoint: Path, threads: int) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "embodied_core.cli.main", "serve", str(checkpoint), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("serving on "):
            return proc, line.split()[2]
    raise RuntimeError(f"embodied serve exited with {proc.wait()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=6, help="requests per episode")
    parser.add_argument("--threads", type=int, default=1, help="torch threads, here and in the server")
    parser.add_argument("--models", default="pi05_tiny,lingbot_va_tiny")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from embodied_core import load_policy
    from embodied_eval import RemotePolicy

    builders = {"pi05_tiny": _pi05_checkpoint, "lingbot_va_tiny": _lingbot_checkpoint}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            checkpoint, episode = builders[name](Path(tmp) / name)
            policy = load_policy(checkpoint)
            _time(policy, episode, episodes=1, steps=args.steps)  # warm-up
            direct = _time(policy, episode, episodes=args.episodes, steps=args.steps)
            proc, url = _serve(checkpoint, args.threads)
            try:
                remote_policy = RemotePolicy(url)
                _time(remote_policy, episode, episodes=1, steps=args.steps)
                timings: list[dict[str, float]] = []
                remote = _time(remote_policy, episode, episodes=args.episodes, steps=args.steps, timings=timings)
                remote_policy.close()
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            infer = [t["infer_ms"] for t in timings]
            queue = [t["queue_ms"] for t in timings]
            print(f"{name:<16} direct predict_action   {_percentiles(direct)}   ({len(direct)} calls)")
            print(f"{'':<16} embodied serve request {_percentiles(remote)}   server infer {_percentiles(infer)}, "
                  f"queue p50 {statistics.median(queue):.2f} ms")
            print(f"{'':<16} overhead p50 {statistics.median(remote) - statistics.median(direct):+.2f} ms")


if __name__ == "__main__":
    main()
