"""One whole loader pass in this process, as a user meets it every epoch: iterator creation to the last batch.

Run by ``benchmarks/dataloader.py`` in a fresh process per repetition, with our venv (``--impl ours``) or the
lerobot side venv (``--impl lerobot``, ``benchmarks/setup_lerobot_venv.sh``); prints one JSON line. The query is
the issue's: lingzu episodes with video (3-6, 10-12), action horizon 50, the current state and camera frame
(uint8), batch 8, the given positions in the given order.

- ours: ``lerobot_datasets`` through its factory (default strategy) read by ``ResumableLoader`` (what the
  trainer uses: per-sample seeding, persistent workers, ``collate_samples``, small-tensor transport).
- lerobot: ``lerobot.datasets.lerobot_dataset.LeRobotDataset`` (``video_backend="torchcodec"``,
  ``return_uint8=True``) under a plain DataLoader with its default collate.

Timed from before the dataset is built: ``build_s`` (dataset construction), ``first_batch_s`` (iterator
creation to the first batch, including worker start-up) and ``pass_s`` (iterator creation to the last batch).
``peak_rss_mib``: VmHWM of each worker, read as the last batch arrives (of the process with 0 workers).

    python benchmarks/loader_pass.py --impl ours --workers 2 --dataset DIR --positions 0,5,17,...
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

EPISODES = [3, 4, 5, 6, 10, 11, 12]
HORIZON = 50
BATCH = 8


def _vmhwm_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def _ours(root: str, positions: list[int], workers: int) -> tuple[Any, Any]:
    from torch.utils.data import Subset

    from embodied_core.config.model_config import BaseDataConfig
    from embodied_core.config.training_args import TrainingArgs
    from embodied_core.data.loader import ResumableLoader
    from embodied_core.data.samplers import cyclic_sampler
    from embodied_core.model_api import collate_samples
    from embodied_data.lerobot.factory import build_dataset

    config = BaseDataConfig(camera_keys=["image"], state_key="state", action_key="actions", state_dim=34,
                            action_dim=34, action_horizon=HORIZON, state_history=1, image_history=1)
    args = TrainingArgs(model_name="benchmark", dataset_path=root, split=",".join(map(str, EPISODES)))
    dataset = build_dataset(args, config)
    loader = ResumableLoader(Subset(dataset, positions), batch_size=BATCH, share_fn=cyclic_sampler(0, 1), seed=0,
                             sample_transform=None, collate_fn=collate_samples, shuffle=False, drop_last=False,
                             num_workers=workers)
    return dataset, loader


def _lerobot(root: str, positions: list[int], workers: int) -> tuple[Any, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from torch.utils.data import DataLoader, Subset

    dataset = LeRobotDataset("lingzu", root=root, episodes=EPISODES, video_backend="torchcodec", return_uint8=True,
                             delta_timestamps={"actions": [i / 30 for i in range(HORIZON)]})
    loader = DataLoader(Subset(dataset, positions), batch_size=BATCH, shuffle=False, num_workers=workers)
    return dataset, loader


def _worker_pids(impl: str, loader: Any, iterator: Any) -> list[int]:
    """The DataLoader worker pids (private attributes: a benchmark may read them)."""
    inner = loader._loader._iterator if impl == "ours" else iterator
    return [w.pid for w in getattr(inner, "_workers", [])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["ours", "lerobot"], required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--positions", required=True, help="comma-separated dataset positions, in reading order")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    opts = parser.parse_args()
    import torch

    torch.set_num_threads(opts.threads)
    positions = [int(p) for p in opts.positions.split(",")]
    started = time.perf_counter()
    dataset, loader = (_ours if opts.impl == "ours" else _lerobot)(opts.dataset, positions, opts.workers)
    built = time.perf_counter()
    iterator = iter(loader)
    batches = -(-len(positions) // BATCH)
    first = None
    indices: list[int] = []
    rss: list[float] = []
    for b in range(batches):
        batch = next(iterator)
        if first is None:
            first = time.perf_counter()
        indices += batch["index"].tolist()
        if b == batches - 1:
            pids = _worker_pids(opts.impl, loader, iterator) if opts.workers else [os.getpid()]
            rss = [_vmhwm_mib(pid) for pid in pids]
    done = time.perf_counter()
    if opts.impl == "ours":
        loader.close()
    print(json.dumps({"impl": opts.impl, "workers": opts.workers, "items": len(indices), "build_s": built - started,
                      "first_batch_s": first - built, "pass_s": done - built,
                      "items_per_s": len(indices) / (done - built), "peak_rss_mib": rss,
                      "index_checksum": sum((i + 1) * v for i, v in enumerate(indices)), "frames": len(dataset)}))


if __name__ == "__main__":
    main()
