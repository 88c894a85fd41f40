"""Throughput of the LeRobot loader next to a bare torchcodec decode loop, and worker memory over time.

Setting (issue 3): ``lingzu_pi05_v30``, the episodes that have video (3-6, 10-12), action horizon 50, state
history 2, the current camera frame; batch 8; DataLoader workers 0 and 2. Items are visited in one shuffled
order shared by both loaders.

- ours: ``lerobot_datasets`` built by its factory (default strategy), i.e. parquet rows, delta windows with pads,
  tasks, the video pts check, and the collate of the whole sample dict.
- bare: a Dataset that only decodes the same timestamps with one cached ``torchcodec`` VideoDecoder per file
  (same seek mode and thread count as ours), under the same DataLoader settings.

Goal: ours >= 0.85x bare items/s; peak RSS per worker within 10% between 500 and 5000 items. Throughput is given
per wall second and per CPU second of the loader's processes; on a host shared with other jobs the CPU figure
is the one to compare (wall time then mostly measures the neighbours).

Side by side with lerobot (issue 19), when the side venv of ``benchmarks/setup_lerobot_venv.sh`` exists: the
same query in ours and in lerobot 0.6.1's ``LeRobotDataset`` (lingzu episodes with video, action horizon 50, the
current state and frame, batch 8, the same ``--side-items`` positions in the same order), one whole pass per
fresh process (``benchmarks/loader_pass.py``), ours and lerobot interleaved, ``--side-rounds`` each. Printed per
worker count: whole-pass items/s (iterator creation to last batch) and its ratio, first-batch time, peak RSS per
worker. Goal: items/s >= 1.5x lerobot's at 0 and 2 workers, first batch <= lerobot's, peak RSS per worker <=
lerobot's.

Image augmentation (issue 25): ours with and without ``data.image_augmentation`` (``--augmentation``, default the
``lerobot`` preset, drawn per sample as the training loader draws it, in the workers), the same items, alternating
rounds. Printed per worker count: items/s plain and augmented, and the slowdown. Goal: under 15 % slower at 2
workers.

    .venv/bin/python benchmarks/dataloader.py [--items 1000] [--rss-items 500 5000] [--workers 0 2]
    .venv/bin/python benchmarks/dataloader.py --skip-bare [--side-rounds 3] [--lerobot-python .venv-lerobot/bin/python]
    .venv/bin/python benchmarks/dataloader.py --only-augmentation [--augmentation lerobot] [--items 400]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.config.training_args import TrainingArgs
from embodied_core.data.transport import PackingCollate, unpack_small_tensors
from embodied_core.model_api import collate_samples
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.lerobot.factory import build_dataset

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPO.parent / "shared" / "datasets" / "lingzu_pi05_v30"
DEFAULT_LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
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


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc, so it works for DataLoader workers too)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass
class Result:
    items_per_s: float
    """Wall-clock throughput."""
    items_per_cpu_s: float
    """Items per CPU second of the main process and its workers: robust when other jobs share the host."""
    rss_kib: dict[int, list[int]]
    """Items seen -> VmHWM (peak RSS, KiB) of each worker (or of the process when workers=0)."""


def run(dataset: Dataset, order: list[int], *, workers: int, batch_size: int,
        checkpoints: tuple[int, ...] = (), ours: bool = False) -> Result:
    """Iterates ``order`` once; the first batch per worker is warm-up (decoders open, imports).

    ``ours`` uses what ``ResumableLoader`` uses: ``collate_samples``, and with workers the small-tensor
    transport (``embodied_core.data.transport``).
    """
    collate = collate_samples if ours else None
    if ours and workers:
        collate = PackingCollate(collate_samples)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=order, num_workers=workers, collate_fn=collate,
                        persistent_workers=False, prefetch_factor=2 if workers else None)
    iterator = iter(loader)
    pids = [w.pid for w in iterator._workers] if workers else []  # private: the worker pids
    me = os.getpid()

    def cpu() -> float:
        return sum(_cpu_seconds(pid) for pid in (me, *pids))

    seen, rss, counted_from, start, cpu_start, cpu_end = 0, {}, 0, 0.0, 0.0, 0.0
    pending = sorted(checkpoints)
    for batch_index, batch in enumerate(iterator):
        if ours and workers:
            batch = unpack_small_tensors(batch)
        seen += len(batch) if isinstance(batch, torch.Tensor) else len(batch["index"])
        if batch_index + 1 == max(workers, 1):
            start, cpu_start, counted_from = time.perf_counter(), cpu(), seen
        elif batch_index + 1 > max(workers, 1):
            cpu_end = cpu()  # read while the workers are alive: they exit when the iterator is exhausted
        while pending and seen >= pending[0]:
            rss[pending.pop(0)] = [_rss_kib(pid, "VmHWM") for pid in (pids or [me])]
    elapsed = time.perf_counter() - start
    return Result((seen - counted_from) / elapsed, (seen - counted_from) / max(cpu_end - cpu_start, 1e-9), rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--items", type=int, default=1000, help="items per throughput measurement")
    parser.add_argument("--rounds", type=int, default=3, help="alternating ours/bare rounds (median kept)")
    parser.add_argument("--rss-items", type=int, nargs="*", default=[500, 5000])
    parser.add_argument("--workers", type=int, nargs="*", default=[0, 2])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-bare", action="store_true", help="only the side-by-side run with lerobot")
    parser.add_argument("--side-items", type=int, default=200, help="positions read per side-by-side pass")
    parser.add_argument("--side-rounds", type=int, default=3, help="fresh-process passes per side and worker count")
    parser.add_argument("--lerobot-python", type=Path, default=DEFAULT_LEROBOT_PYTHON,
                        help="the side venv's interpreter; the side-by-side run is skipped when it is missing")
    parser.add_argument("--augmentation", default="lerobot", help="augmentation preset measured (lerobot)")
    parser.add_argument("--only-augmentation", action="store_true", help="only the with/without augmentation run")
    opts = parser.parse_args()
    torch.set_num_threads(1)

    ours = build_ours(opts.dataset)
    with_augmentation(opts, ours)
    if opts.only_augmentation:
        return
    if not opts.skip_bare:
        versus_bare(opts, ours)
    if opts.lerobot_python.exists():
        versus_lerobot(opts, len(ours))
    else:
        print(f"lerobot side by side skipped: {opts.lerobot_python} not found (bash benchmarks/setup_lerobot_venv.sh)")


def _pass(python: Path, impl: str, opts: argparse.Namespace, positions: list[int], workers: int) -> dict[str, Any]:
    """One whole pass in a fresh process (``loader_pass.py``), its JSON result."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([str(python), str(REPO / "benchmarks" / "loader_pass.py"), "--impl", impl,
                             "--dataset", str(opts.dataset), "--workers", str(workers),
                             "--positions", ",".join(map(str, positions))],
                            capture_output=True, text=True, env=env, cwd=REPO, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"{impl} pass with {workers} workers failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def versus_lerobot(opts: argparse.Namespace, frames: int) -> None:
    """Ours vs lerobot's LeRobotDataset: the same positions, fresh process per pass, interleaved."""
    positions = random.Random(opts.seed).sample(range(frames), opts.side_items)
    print(f"side by side with lerobot ({opts.lerobot_python}): {opts.side_items} positions of {frames} frames, "
          f"batch 8, {opts.side_rounds} fresh-process passes per side, interleaved")
    for workers in opts.workers:
        runs: dict[str, list[dict[str, Any]]] = {"ours": [], "lerobot": []}
        for _ in range(opts.side_rounds):
            runs["ours"].append(_pass(Path(sys.executable), "ours", opts, positions, workers))
            runs["lerobot"].append(_pass(opts.lerobot_python, "lerobot", opts, positions, workers))
        if len({r["index_checksum"] for side in runs.values() for r in side}) != 1:
            raise RuntimeError("ours and lerobot read different frames: the comparison would not be like for like")

        print(_side_line(runs, workers))


def _side_line(runs: dict[str, list[dict[str, Any]]], workers: int) -> str:
    """One printed row of the side-by-side comparison (medians over the passes)."""
    def med(side: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[side])

    def rss(side: str) -> float:
        return statistics.median(max(r["peak_rss_mib"]) for r in runs[side])

    ratio = med("ours", "items_per_s") / med("lerobot", "items_per_s")
    return (f"workers={workers}: whole pass ours {med('ours', 'items_per_s'):6.1f} items/s, lerobot "
            f"{med('lerobot', 'items_per_s'):6.1f} items/s, ratio {ratio:.2f}x (goal >= 1.5x) | first batch ours "
            f"{med('ours', 'first_batch_s'):.2f} s, lerobot {med('lerobot', 'first_batch_s'):.2f} s | peak RSS per "
            f"{'worker' if workers else 'process'} ours {rss('ours'):.0f} MiB, lerobot {rss('lerobot'):.0f} MiB | "
            f"dataset build ours {med('ours', 'build_s'):.1f} s, lerobot {med('lerobot', 'build_s'):.1f} s "
            f"(medians of {len(runs['ours'])})")


class Augmented(Dataset):
    """``dataset`` with the image augmentation the training loader applies (epoch 0 draws), in the workers."""

    def __init__(self, dataset: Dataset, augmentation: Any) -> None:
        self.dataset, self.augmentation = dataset, augmentation

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.augmentation(self.dataset[index], epoch=0, index=index)


def with_augmentation(opts: argparse.Namespace, ours: LeRobotDataset) -> None:
    """Ours with and without the ``--augmentation`` preset: the same items, alternating rounds (issue 25)."""
    from embodied_core.config.image_augmentation import ImageAugmentationConfig
    from embodied_core.data.image_augmentation import build_ops, resolve_augmentation
    from embodied_core.data.image_augmentation.pipeline import ImageAugmentation

    settings = resolve_augmentation(ImageAugmentationConfig(preset=opts.augmentation), cameras=["image"])
    assert settings is not None
    augmented = Augmented(ours, ImageAugmentation(settings, build_ops(settings), seed=opts.seed,
                                                  camera_keys=["image"]))
    order = _order(len(ours), opts.items, opts.seed)
    frame = ours[0]["image"]
    print(f"augmentation {opts.augmentation}: {opts.items} items of {opts.dataset.name} (image {list(frame.shape)}), "
          f"batch {opts.batch_size}, {opts.rounds} alternating rounds")
    print("  per op, one frame, one thread (min of 5): " + ", ".join(
        f"{entry.name}({_first_param(entry.params)}) {_op_ms(op, frame):.1f} ms"
        for entry, op in zip(augmented.augmentation.entries, augmented.augmentation.ops, strict=True)))
    for workers in opts.workers:
        plain_runs, aug_runs = [], []
        for _ in range(opts.rounds):
            plain_runs.append(run(ours, order, workers=workers, batch_size=opts.batch_size, ours=True))
            aug_runs.append(run(augmented, order, workers=workers, batch_size=opts.batch_size, ours=True))
        wall_p = statistics.median(r.items_per_s for r in plain_runs)
        wall_a = statistics.median(r.items_per_s for r in aug_runs)
        cpu_p = statistics.median(r.items_per_cpu_s for r in plain_runs)
        cpu_a = statistics.median(r.items_per_cpu_s for r in aug_runs)
        print(f"workers={workers}: without {wall_p:6.1f} items/s ({cpu_p:6.1f}/cpu-s) | with {opts.augmentation} "
              f"{wall_a:6.1f} items/s ({cpu_a:6.1f}/cpu-s) | slower by wall {1 - wall_a / wall_p:+.1%}, cpu "
              f"{1 - cpu_a / cpu_p:+.1%} (goal < 15% at 2 workers; median of {opts.rounds})")


def _op_ms(op: Any, frame: torch.Tensor) -> float:
    times = []
    for _ in range(6):
        start = time.perf_counter()
        op.apply(frame, op.draw(frame, input_size=tuple(frame.shape[-2:])))
        times.append(time.perf_counter() - start)
    return 1000 * min(times[1:])


def _first_param(params: Any) -> str:
    """The first parameter an op entry sets (``brightness`` for lerobot's brightness jitter)."""
    return next((f.name for f in attrs.fields(type(params)) if getattr(params, f.name) is not None), "")


def versus_bare(opts: argparse.Namespace, ours: LeRobotDataset) -> None:
    """Ours vs a bare torchcodec decode loop: throughput and worker memory over time (issue 3)."""
    bare = BareTorchCodec(bare_jobs(ours))
    print(f"dataset {opts.dataset.name}: {len(ours)} frames, episodes {ours.episodes}, batch {opts.batch_size}, "
          f"cpus {os.cpu_count()}")
    order = _order(len(ours), opts.items, opts.seed)
    for workers in opts.workers:
        ours_runs, bare_runs = [], []
        for _ in range(opts.rounds):  # alternate ours/bare: drifting load on a shared host hits both alike
            ours_runs.append(run(ours, order, workers=workers, batch_size=opts.batch_size, ours=True))
            bare_runs.append(run(bare, order, workers=workers, batch_size=opts.batch_size))
        wall_o = statistics.median(r.items_per_s for r in ours_runs)
        wall_b = statistics.median(r.items_per_s for r in bare_runs)
        cpu_o = statistics.median(r.items_per_cpu_s for r in ours_runs)
        cpu_b = statistics.median(r.items_per_cpu_s for r in bare_runs)
        print(f"workers={workers}: ours {wall_o:6.1f} items/s ({cpu_o:6.1f}/cpu-s) | bare torchcodec {wall_b:6.1f} "
              f"items/s ({cpu_b:6.1f}/cpu-s) | ratio wall {wall_o / wall_b:.3f}, cpu {cpu_o / cpu_b:.3f} "
              f"(median of {opts.rounds})")
    if opts.rss_items:
        rss_order = _order(len(ours), max(opts.rss_items), opts.seed + 1)
        for workers in opts.workers:
            rss = run(ours, rss_order, workers=workers, batch_size=opts.batch_size,
                      checkpoints=tuple(opts.rss_items), ours=True).rss_kib
            first, last = min(rss), max(rss)
            growth = [b / a - 1 for a, b in zip(rss[first], rss[last], strict=True)]
            cells = " | ".join(f"{n} items: " + ", ".join(f"{v / 1024:.0f} MiB" for v in rss[n]) for n in sorted(rss))
            print(f"workers={workers}: peak RSS per {'worker' if workers else 'process'}: {cells} | growth "
                  + ", ".join(f"{g:+.1%}" for g in growth))


if __name__ == "__main__":
    main()
