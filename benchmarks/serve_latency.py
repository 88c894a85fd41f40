"""Request latency of ``embodied serve`` vs a direct ``predict_action`` call, for pi05_tiny and lingbot_va_tiny.

For each model: train 2 steps (pi05_tiny on ``embodied data synth`` output, 96 x 96 frames; lingbot_va_tiny on
``../shared/datasets/lerobot_written/v21`` with its latent cache, encoded by embodied_models.wan's tiny random VAE
and UMT5), load the checkpoint in this process and start ``embodied serve`` on it in a child process (same thread
count), then time ``--episodes`` episodes of ``--steps`` requests each, both ways and interleaved (each step calls
both, in alternating order): ``predict_action`` here, and a request over the websocket (openpi's protocol, through
:class:`embodied_eval.RemotePolicy`: pack, send, infer, receive, unpack). Prints p50/p99 per model, the server's own
``infer_ms``/``queue_ms``, and the transport: the request less the server's own inference, which leaves out how fast
the server process happens to compute (on a shared machine it runs in turn with this one, and the model's working
set goes cold between requests). Latency includes the observation's encoding (a 96 x 96 frame: 27 KiB;
lingbot_va_tiny's keyframe chunks: 12 frames x 2 cameras).

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

SHARED = Path(os.environ.get("SHARED_DATA_DIR", Path(__file__).resolve().parents[2] / "shared"))
"""``../shared`` next to the checkout (as the tests find it); override with SHARED_DATA_DIR."""
LINGBOT_DATASET = SHARED / "datasets" / "lerobot_written" / "v21"
UMT5_TOKENIZER = SHARED / "datasets" / "strategies" / "tokenizers" / "umt5_tiny"
TASK = "pick the red cube"


def _dataset_observations(root: Path, positions: range) -> list[dict[str, Any]]:
    """Frames of a LeRobot dataset as a robot sends them: uint8 HWC frames, float32 state, the task string."""
    import numpy as np

    from embodied_data.lerobot.dataset import LeRobotDataset

    data = LeRobotDataset(root, video_backend="pyav")
    out = []
    for position in positions:
        sample = data[position]
        obs = {key: sample[key].permute(1, 2, 0).numpy().copy() for key in data.camera_keys}
        obs["observation.state"] = sample["observation.state"].numpy().astype(np.float32)
        obs["task"] = sample["task"]
        out.append(obs)
    return out


def _pi05_checkpoint(work: Path) -> tuple[Path, Callable[[], Iterator[dict[str, Any]]]]:
    from embodied_core.trainer.api import Trainer
    from embodied_data.synth import SynthConfig, write_synthetic_dataset

    data = work / "synth"
    write_synthetic_dataset(data, SynthConfig(num_episodes=4, min_length=20, max_length=20, seed=0))
    Trainer({"training": {"model_name": "pi05_tiny", "dataset_format": "lerobot_datasets", "dataset_path": str(data),
                          "train_iters": 2, "save_interval": 2, "dtype": "float32", "per_device_batch_size": 2,
                          "num_workers": 0, "lr_warmup_iters": 0, "output_dir": str(work / "pi05")},
             "data": {"state_dim": 2, "action_dim": 2}}).train()
    observations = _dataset_observations(data, range(20))

    def episode() -> Iterator[dict[str, Any]]:
        yield from observations

    return work / "pi05" / "checkpoints" / "step_2", episode


def _tiny_wan_base(folder: Path) -> Path:
    """A BASE_MODEL_PATH-style folder: the tiny random Wan2.2 VAE and UMT5 of embodied_models.wan (z_dim 8, text
    width 16, as lingbot_va_tiny expects) with the shared tiny UMT5 tokenizer."""
    from embodied_models.wan.text import build_tiny_umt5
    from embodied_models.wan.vae import build_tiny_vae

    build_tiny_vae(seed=0).save_pretrained(str(folder / "vae"))
    return build_tiny_umt5(folder, UMT5_TOKENIZER, seed=0)


def _episode_frames(cameras: list[str], count: int) -> list[Any]:
    """Episode 0's first ``count`` frames per camera, uint8 HWC, as a robot's cameras deliver them."""
    import numpy as np

    from embodied_data.video.backends import make_backend

    backend = make_backend("pyav")
    # contiguous, as a camera driver hands them out (a strided view would cost the client a slow gather in pack)
    return [np.ascontiguousarray(backend.decode(LINGBOT_DATASET / f"videos/chunk-000/{cam}/episode_000000.mp4",
                                                [i / 30 for i in range(count)]).frames.permute(0, 2, 3, 1).numpy())
            for cam in cameras]


def _lingbot_checkpoint(work: Path) -> tuple[Path, Callable[[], Iterator[dict[str, Any]]]]:
    from embodied_core.config.resolve import load_config
    from embodied_core.trainer.api import Trainer
    from embodied_models.lingbot_va.precompute import precompute_latents

    base = _tiny_wan_base(work / "base")
    config = load_config(training={"model_name": "lingbot_va_tiny"}, data={"latent_cache": str(work / "cache")})
    precompute_latents(LINGBOT_DATASET, base_model_path=base, data_config=config.data,
                       text_len=config.model.text_len, device="cpu", dtype=torch.float32)
    trainer = Trainer({"training": {"model_name": "lingbot_va_tiny", "dataset_format": "lerobot_datasets",
                                    "dataset_path": str(LINGBOT_DATASET), "lerobotdataset_version": "v2.1",
                                    "dataset_strategy": "lingbot_va", "trainer_type": "lingbot_va", "num_workers": 0,
                                    "per_device_batch_size": 2, "dtype": "float32", "seed": 7, "train_iters": 2,
                                    "save_interval": 2, "lr_warmup_iters": 0, "output_dir": str(work / "lingbot")},
                       "data": {"latent_cache": str(work / "cache")}})
    trainer.train()
    cameras = list(trainer.config.data.camera_keys)
    frames = _episode_frames(cameras, 21)

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


def _time(direct: Any, remote: Any, episode: Callable[[], Iterator[dict[str, Any]]], *, episodes: int,
          steps: int) -> tuple[list[float], list[float], list[dict[str, float]]]:
    """Milliseconds per call of ``direct`` and ``remote`` (the same episodes, both reset per episode; at each step
    both are called, the first one alternating) and the server's timing of each remote call."""
    times: dict[Any, list[float]] = {direct: [], remote: []}
    timings = []
    calls = 0
    for _ in range(episodes):
        direct.reset()
        remote.reset()
        for _, obs in zip(range(steps), episode(), strict=False):
            for policy in (direct, remote) if calls % 2 else (remote, direct):
                start = time.perf_counter()
                policy.predict_action(obs)
                times[policy].append((time.perf_counter() - start) * 1000)
            timings.append(remote.last_timing)
            calls += 1
    return times[direct], times[remote], timings


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
            proc, url = _serve(checkpoint, args.threads)
            try:
                remote_policy = RemotePolicy(url)
                _time(policy, remote_policy, episode, episodes=1, steps=args.steps)  # warm-up
                direct, remote, timings = _time(policy, remote_policy, episode, episodes=args.episodes,
                                                steps=args.steps)
                remote_policy.close()
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            infer = [t["infer_ms"] for t in timings]
            queue = [t["queue_ms"] for t in timings]
            transport = [r - i for r, i in zip(remote, infer, strict=True)]
            direct_p50 = statistics.median(direct)
            print(f"{name:<16} direct predict_action   {_percentiles(direct)}   ({len(direct)} calls)")
            print(f"{'':<16} embodied serve request {_percentiles(remote)}   server infer {_percentiles(infer)}, "
                  f"queue p50 {statistics.median(queue):.2f} ms")
            print(f"{'':<16} overhead p50 {statistics.median(remote) - direct_p50:+.2f} ms; transport (request less "
                  f"the server's inference) p50 {statistics.median(transport):.2f} ms = "
                  f"{statistics.median(transport) / direct_p50:.1%} of the direct p50")


if __name__ == "__main__":
    main()
