"""Throughput of the LeRobot loader next to a bare torchcodec decode loop, and worker memory over time.

Setting (issue 3): ``lingzu_pi05_v30``, the episodes that have video (3-6, 10-12), action horizon 50, state
history 2, the current camera frame; batch 8; DataLoader workers 0 and 2. Items are visited in one shuffled
order shared by both loaders.

- ours: ``lerobot_datasets`` built by its factory (default strategy), i.e. parquet rows, delta windows with pads,
  tasks, the video pts check, and the collate of the whole sample dict.
- bare: a Dataset that only decodes the same timestamps with one cached ``torchcodec`` VideoDecoder per file
  (same seek mode and thread count as ours), under the same DataLoader settings.

Goal: ours >= 0.85x bare items/s; peak RSS per worker within 10% between 500 and 5000 items.

    .venv/bin/python benchmarks/dataloader.py [--items 1000] [--rss-items 500 5000] [--workers 0 2]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.lerobot.factory import build_dataset

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "lingzu_pi05_v30"
EPISODES = "3-6,10-12"


class BareTorchCodec(Dataset):
    """The same frames as ``ours``, decoded with nothing else: one cached VideoDecoder per file."""

    def __init__(self, jobs: list[tuple[str, float]]) -> None:
        self.jobs = jobs  # position -> (video path, query time)
        self.decoders: dict[str, Any] = {}
        self.pid = os.getpid()

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, position: int) -> torch.Tensor:
        from torchcodec.decoders import VideoDecoder

        if self.pid != os.getpid():  # a forked worker must not reuse the parent's FFmpeg contexts
            self.decoders, self.pid = {}, os.getpid()
        path, t = self.jobs[position]
        decoder = self.decoders.get(path)
        if decoder is None:
            decoder = self.decoders[path] = VideoDecoder(path, seek_mode="approximate", num_ffmpeg_threads=1)
        index = round(t * decoder.metadata.average_fps)
        return decoder.get_frames_at(indices=[index]).data[0]


def build_ours(root: Path) -> LeRobotDataset:
    config = BaseDataConfig(camera_keys=["image"], state_key="state", action_key="actions", state_dim=34,
                            action_dim=34, action_horizon=50, state_history=2, image_history=1)
    args = TrainingArgs(model_name="benchmark", dataset_path=str(root), split=EPISODES)
    return build_dataset(args, config)


def bare_jobs(ds: LeRobotDataset) -> list[tuple[str, float]]:
    columns = ds.table.columns
    jobs = []
    for row in range(len(ds)):
        ep = int(columns["episode_index"][row])
        path = str(ds.meta.video_file(ep, "image"))
        jobs.append((path, ds.meta.video_from_timestamp(ep, "image") + float(columns["timestamp"][row])))
    return jobs


def _order(length: int, count: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    reps = -(-count // length)
    return np.concatenate([rng.permutation(length) for _ in range(reps)])[:count].tolist()


def _rss_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


def run(dataset: Dataset, order: list[int], *, workers: int, batch_size: int,
        checkpoints: tuple[int, ...] = ()) -> tuple[float, dict[int, list[int]]]:
    """Items/s over ``order`` (after a first batch per worker as warm-up) and VmHWM (KiB) per worker at checkpoints."""
    loader = DataLoader(dataset, batch_size=batch_size, sampler=order, num_workers=workers,
                        persistent_workers=False, prefetch_factor=2 if workers else None)
    iterator = iter(loader)
    pids = [w.pid for w in iterator._workers] if workers else [os.getpid()]  # private: the worker pids
    seen, rss = 0, {}
    warm = max(workers, 1)
    start = None
    pending = sorted(checkpoints)
    for batch_index, batch in enumerate(iterator):
        seen += len(batch) if isinstance(batch, torch.Tensor) else len(batch["index"])
        if batch_index + 1 == warm:
            start, counted_from = time.perf_counter(), seen
        while pending and seen >= pending[0]:
            rss[pending.pop(0)] = [_rss_kib(pid, "VmHWM") for pid in pids]
    elapsed = time.perf_counter() - start
    return (seen - counted_from) / elapsed, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--items", type=int, default=1000, help="items per throughput measurement")
    parser.add_argument("--rounds", type=int, default=2, help="alternating ours/bare rounds (best kept)")
    parser.add_argument("--rss-items", type=int, nargs="*", default=[500, 5000])
    parser.add_argument("--workers", type=int, nargs="*", default=[0, 2])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()
    torch.set_num_threads(1)

    ours = build_ours(opts.dataset)
    bare = BareTorchCodec(bare_jobs(ours))
    print(f"dataset {opts.dataset.name}: {len(ours)} frames, episodes {ours.episodes}, batch {opts.batch_size}, "
          f"cpus {os.cpu_count()}")
    order = _order(len(ours), opts.items, opts.seed)
    for workers in opts.workers:
        best_ours, best_bare = 0.0, 0.0
        for _ in range(opts.rounds):  # alternate, keep the best of each: the host is shared and noisy
            best_ours = max(best_ours, run(ours, order, workers=workers, batch_size=opts.batch_size)[0])
            best_bare = max(best_bare, run(bare, order, workers=workers, batch_size=opts.batch_size)[0])
        print(f"workers={workers}: ours {best_ours:7.1f} items/s | bare torchcodec {best_bare:7.1f} items/s | "
              f"ratio {best_ours / best_bare:.3f}")
    if opts.rss_items:
        rss_order = _order(len(ours), max(opts.rss_items), opts.seed + 1)
        for workers in opts.workers:
            _, rss = run(ours, rss_order, workers=workers, batch_size=opts.batch_size,
                         checkpoints=tuple(opts.rss_items))
            first, last = min(rss), max(rss)
            growth = [b / a - 1 for a, b in zip(rss[first], rss[last], strict=True)]
            cells = " | ".join(f"{n} items: " + ", ".join(f"{v / 1024:.0f} MiB" for v in rss[n]) for n in sorted(rss))
            print(f"workers={workers}: peak RSS per {'worker' if workers else 'process'}: {cells} | growth "
                  + ", ".join(f"{g:+.1%}" for g in growth))


if __name__ == "__main__":
    main()
