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

Side by side with lerobot (issues 19, 29), when the side venv of ``benchmarks/setup_lerobot_venv.sh`` exists: the
same query in ours and in lerobot 0.6.1's ``LeRobotDataset`` (the episodes with video, action horizon 50, the
current state, ``--camera-frames`` camera frames ending at the current one, batch 8, the same ``--side-items``
positions in the same order), one whole pass per fresh process (``benchmarks/loader_pass.py``), on each of
``--side-datasets``: ``lingzu`` (the shared lingzu_pi05_v30, MPEG-4 640x480), ``g1`` (the shared g1_inspire_v21,
AV1 640x480, LeRobot v2.1: lerobot 0.6.1 refuses it, so ours and the ceiling only), ``synth`` (30 episodes at
224x224 written by ``embodied data synth`` into ``outputs/``, once). Next to
them, the decoder's limit (``benchmarks/decode_ceiling.py``): the frames of our pass decoded by torchcodec alone in
a tight loop, in as many processes as the pass has workers. Ours, lerobot and the ceiling run interleaved,
``--side-rounds`` each (``--per-sample`` adds our per-sample decoding path). Printed per dataset and worker count
(medians): whole-pass items/s and frames/s (iterator creation to last batch) with the ratio to lerobot's,
first-batch time, peak RSS per worker, our frames/s as a fraction of the ceiling's, and the load average over the
runs; then the same per CPU second of the pass's processes (``loader_pass.py``: the figure that holds while other
jobs share the host) and of the ceiling's loops. Goals: items/s >= 3x lerobot's at 2 workers (issue 29; 1.5x at 0
and 2 in issue 19), >= 0.8 of the decode ceiling at 0 workers, first batch <= lerobot's, peak RSS per worker <=
lerobot's.

Image augmentation (issue 25): ours with and without ``data.image_augmentation`` (``--augmentation``, default the
``lerobot`` preset, drawn per sample as the training loader draws it, in the workers), the same items, alternating
rounds. Printed per worker count: items/s plain and augmented, and the slowdown. Goal: under 15 % slower at 2
workers.

    .venv/bin/python benchmarks/dataloader.py [--items 1000] [--rss-items 500 5000] [--workers 0 2]
    .venv/bin/python benchmarks/dataloader.py --skip-bare [--side-rounds 3] [--lerobot-python .venv-lerobot/bin/python]
    .venv/bin/python benchmarks/dataloader.py --only-side --side-datasets lingzu synth --camera-frames 1 9
    .venv/bin/python benchmarks/dataloader.py --only-augmentation [--augmentation lerobot] [--items 400]
        [--augmentation-datasets lingzu g1 synth]
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
SHARED = REPO.parent / "shared" / "datasets"
DEFAULT_DATASET = SHARED / "lingzu_pi05_v30"
DEFAULT_LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
EPISODES = "3-6,10-12"


@dataclasses.dataclass(frozen=True)
class SideDataset:
    """A dataset of the side-by-side run: where it is, the episodes with video, and the query's keys."""

    path: Path
    episodes: tuple[int, ...]
    camera: str
    state_key: str
    action_key: str
    synth: bool = False
    """Written by ``embodied data synth`` when absent (30 episodes, 224x224, 30 fps)."""


SIDE_DATASETS = {
    "lingzu": SideDataset(DEFAULT_DATASET, (3, 4, 5, 6, 10, 11, 12), "image", "state", "actions"),
    "g1": SideDataset(SHARED / "g1_inspire_v21", tuple(range(10, 20)), "observation.images.cam_high",
                      "observation.state", "action"),
    "synth": SideDataset(REPO / "outputs" / "synth30_224", tuple(range(30)), "observation.images.front",
                         "observation.state", "action", synth=True),
}


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
    parser.add_argument("--side-datasets", nargs="+", default=["lingzu"], choices=sorted(SIDE_DATASETS))
    parser.add_argument("--camera-frames", type=int, nargs="+", default=[1],
                        help="camera frames per sample in the side-by-side run (1: the current frame; 9: a window)")
    parser.add_argument("--per-sample", action="store_true", help="side by side: also our per-sample decoding path")
    parser.add_argument("--no-ceiling", action="store_true", help="side by side: skip the decode ceiling")
    parser.add_argument("--only-side", action="store_true", help="only the side-by-side run with lerobot")
    parser.add_argument("--lerobot-python", type=Path, default=DEFAULT_LEROBOT_PYTHON,
                        help="the side venv's interpreter; the side-by-side run is skipped when it is missing")
    parser.add_argument("--augmentation", default="lerobot", help="augmentation preset measured (lerobot)")
    parser.add_argument("--only-augmentation", action="store_true", help="only the with/without augmentation run")
    parser.add_argument("--augmentation-datasets", nargs="+", default=["lingzu"], choices=sorted(SIDE_DATASETS),
                        help="datasets of the with/without augmentation run (their camera of the side-by-side run)")
    opts = parser.parse_args()
    torch.set_num_threads(1)

    if not opts.only_side:
        for name in opts.augmentation_datasets:
            with_augmentation(opts, name)
        if opts.only_augmentation:
            return
        if not opts.skip_bare:
            versus_bare(opts, build_ours(opts.dataset))
    if opts.lerobot_python.exists():
        for name in opts.side_datasets:
            for camera_frames in opts.camera_frames:
                versus_lerobot(opts, name, camera_frames)
    else:
        print(f"lerobot side by side skipped: {opts.lerobot_python} not found (bash benchmarks/setup_lerobot_venv.sh)")


def _query_flags(side: SideDataset, camera_frames: int, batch_size: int) -> list[str]:
    return ["--dataset", str(side.path), "--episodes", ",".join(map(str, side.episodes)), "--camera", side.camera,
            "--state-key", side.state_key, "--action-key", side.action_key, "--camera-frames", str(camera_frames),
            "--batch-size", str(batch_size)]


def _pass(python: Path, impl: str, query: list[str], positions: list[int], workers: int,
          extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """One whole pass in a fresh process (``loader_pass.py``), its JSON result."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([str(python), str(REPO / "benchmarks" / "loader_pass.py"), "--impl", impl, *query,
                             "--workers", str(workers), "--positions", ",".join(map(str, positions)), *extra],
                            capture_output=True, text=True, env=env, cwd=REPO, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"{impl} pass with {workers} workers failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def side_dataset(side: SideDataset, camera_frames: int) -> LeRobotDataset:
    """Our dataset for a side dataset's query (``loader_pass.py``'s, which the side-by-side passes read), written
    first when it is the synth one."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from loader_pass import build_ours as build_query

    ensure_synth(side)
    return build_query(argparse.Namespace(
        dataset=str(side.path), episodes=list(side.episodes), camera=side.camera, state_key=side.state_key,
        action_key=side.action_key, horizon=50, camera_frames=camera_frames))


def ensure_synth(side: SideDataset) -> None:
    """Writes the synth dataset of the side-by-side run when it is absent (into ``outputs/``, git-ignored)."""
    if not side.synth or (side.path / "meta" / "info.json").is_file():
        return
    from embodied_data.synth import SynthConfig, write_synthetic_dataset

    config = SynthConfig(num_episodes=len(side.episodes), fps=30, min_length=100, max_length=200,
                         image_size=(224, 224), seed=0)
    summary = write_synthetic_dataset(side.path, config, overwrite=True)
    print(f"wrote {summary.root}: {summary.num_episodes} episodes, {summary.num_frames} frames, 224x224, "
          f"{summary.codec}")


def versus_lerobot(opts: argparse.Namespace, name: str, camera_frames: int) -> None:
    """Ours vs lerobot's LeRobotDataset (and the decode ceiling): the same positions, fresh process per pass,
    interleaved."""
    side = SIDE_DATASETS[name]
    query = _query_flags(side, camera_frames, opts.batch_size)
    frames = len(side_dataset(side, camera_frames))
    positions = random.Random(opts.seed).sample(range(frames), min(opts.side_items, frames))
    version = json.loads((side.path / "meta" / "info.json").read_text())["codebase_version"]
    with_lerobot = version == "v3.0"  # lerobot 0.6.1 refuses v2.x datasets (BackwardCompatibilityError)
    if not with_lerobot:
        print(f"{name} is LeRobot {version}: lerobot 0.6.1 reads only v3.0, so only ours and the ceiling run")
    print(f"side by side with lerobot on {name} ({side.path.name}, {camera_frames} camera frame(s) per sample): "
          f"{len(positions)} positions of {frames} frames, batch {opts.batch_size}, {opts.side_rounds} fresh-process "
          f"passes per side, interleaved")
    ours = Path(sys.executable)
    for workers in opts.workers:
        runs: dict[str, list[dict[str, Any]]] = {"ours": [], "lerobot": [], "ceiling": [], "per_sample": []}
        for _ in range(opts.side_rounds):
            runs["ours"].append(_pass(ours, "ours", query, positions, workers))
            if with_lerobot:
                runs["lerobot"].append(_pass(opts.lerobot_python, "lerobot", query, positions, workers))
            if not opts.no_ceiling:
                runs["ceiling"].append(_pass(ours, "ceiling", query, positions, workers))
            if opts.per_sample:
                runs["per_sample"].append(_pass(ours, "ours", query, positions, workers, ("--per-sample",)))
        if len({r["index_checksum"] for side_runs in runs.values() for r in side_runs}) != 1:
            raise RuntimeError("ours and lerobot read different frames: the comparison would not be like for like")
        for line in _side_lines(runs, workers):
            print(line)


def _side_lines(runs: dict[str, list[dict[str, Any]]], workers: int) -> list[str]:
    """The printed rows of the side-by-side comparison (medians over the passes)."""
    def med(side: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[side])

    def rss(side: str) -> float:
        return statistics.median(max(r["peak_rss_mib"]) for r in runs[side])

    loads = [r["load_avg"] for side in runs.values() for r in side]
    unit = "worker" if workers else "process"
    if runs["lerobot"]:
        ratio = med("ours", "items_per_s") / med("lerobot", "items_per_s")
        cpu_ratio = med("ours", "items_per_cpu_s") / med("lerobot", "items_per_cpu_s")
        lines = [f"workers={workers}: whole pass ours {med('ours', 'items_per_s'):6.1f} items/s "
                 f"({med('ours', 'frames_per_s'):6.1f} frames/s), lerobot {med('lerobot', 'items_per_s'):6.1f} "
                 f"items/s ({med('lerobot', 'frames_per_s'):6.1f} frames/s), ratio {ratio:.2f}x (goal >= 3x at 2 "
                 f"workers) | first batch ours {med('ours', 'first_batch_s'):.2f} s, lerobot "
                 f"{med('lerobot', 'first_batch_s'):.2f} s | peak RSS per {unit} ours {rss('ours'):.0f} MiB, lerobot "
                 f"{rss('lerobot'):.0f} MiB | dataset build ours {med('ours', 'build_s'):.1f} s, lerobot "
                 f"{med('lerobot', 'build_s'):.1f} s (medians of {len(runs['ours'])}; load average "
                 f"{min(loads):.1f}-{max(loads):.1f})",
                 f"  per CPU second (this process and its workers): ours {med('ours', 'items_per_cpu_s'):6.1f} items "
                 f"({med('ours', 'frames_per_cpu_s'):6.1f} frames), lerobot {med('lerobot', 'items_per_cpu_s'):6.1f} "
                 f"items ({med('lerobot', 'frames_per_cpu_s'):6.1f} frames), ratio {cpu_ratio:.2f}x"]
    else:
        lines = [f"workers={workers}: whole pass ours {med('ours', 'items_per_s'):6.1f} items/s "
                 f"({med('ours', 'frames_per_s'):6.1f} frames/s; {med('ours', 'items_per_cpu_s'):6.1f} items per CPU "
                 f"second), no lerobot run | first batch {med('ours', 'first_batch_s'):.2f} s | peak RSS per {unit} "
                 f"{rss('ours'):.0f} MiB | dataset build {med('ours', 'build_s'):.1f} s (medians of "
                 f"{len(runs['ours'])}; load average {min(loads):.1f}-{max(loads):.1f})"]
    if runs["per_sample"]:
        lines.append(f"  ours decoding per sample: {med('per_sample', 'items_per_s'):6.1f} items/s; batched decoding "
                     f"is {med('ours', 'items_per_s') / med('per_sample', 'items_per_s'):.2f}x that")
    if runs["ceiling"]:
        frames = runs["ceiling"][0]["frames_returned"]
        batched = frames / med("ceiling", "ceiling_batched_s")
        per_sample = frames / med("ceiling", "ceiling_per_sample_s")
        ours = med("ours", "frames_per_s")
        lines.append(f"  decode ceiling ({max(workers, 1)} process(es), torchcodec alone): {batched:6.1f} frames/s "
                     f"batched per file ({runs['ceiling'][0]['decoded_batched']} distinct frames), {per_sample:6.1f} "
                     f"frames/s per sample ({runs['ceiling'][0]['decoded_per_sample']}) | ours = {ours / batched:.2f} "
                     f"of the batched ceiling, {ours / per_sample:.2f} of the per-sample one (goal >= 0.8, 0 workers)")
        cpu_batched = frames / med("ceiling", "ceiling_batched_cpu_s")
        lines.append(f"  per CPU second: ceiling {cpu_batched:6.1f} frames batched per file | ours = "
                     f"{med('ours', 'frames_per_cpu_s') / cpu_batched:.2f} of it (the ceiling's decoders are open and "
                     f"warm before its clock starts; our pass opens its own)")
    return lines


class Augmented(Dataset):
    """``dataset`` with the image augmentation the training loader applies (epoch 0 draws), in the workers."""

    def __init__(self, dataset: Dataset, augmentation: Any) -> None:
        self.dataset, self.augmentation = dataset, augmentation

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.augmentation(self.dataset[index], epoch=0, index=index)


def with_augmentation(opts: argparse.Namespace, name: str) -> None:
    """Ours with and without the ``--augmentation`` preset on side dataset ``name`` (its camera, the current
    frame): the same items, alternating rounds (issue 25)."""
    from embodied_core.config.image_augmentation import ImageAugmentationConfig
    from embodied_core.data.image_augmentation import build_ops, resolve_augmentation
    from embodied_core.data.image_augmentation.pipeline import ImageAugmentation

    side = SIDE_DATASETS[name]
    ours = side_dataset(side, camera_frames=1)
    settings = resolve_augmentation(ImageAugmentationConfig(preset=opts.augmentation), cameras=[side.camera])
    assert settings is not None
    augmented = Augmented(ours, ImageAugmentation(settings, build_ops(settings), seed=opts.seed,
                                                  camera_keys=[side.camera]))
    order = _order(len(ours), opts.items, opts.seed)
    frame = ours[0][side.camera]
    print(f"augmentation {opts.augmentation}: {opts.items} items of {name} ({side.path.name}, {side.camera} "
          f"{list(frame.shape)}), batch {opts.batch_size}, {opts.rounds} alternating rounds")
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
              f"{wall_a:6.1f} items/s ({cpu_a:6.1f}/cpu-s) | items/s lower by wall {1 - wall_a / wall_p:.1%} "
              f"({wall_p / wall_a:.2f}x the time per item), cpu {1 - cpu_a / cpu_p:.1%} (goal < 15% at 2 workers; "
              f"median of {opts.rounds})")


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
