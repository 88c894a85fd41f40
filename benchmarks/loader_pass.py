"""One whole loader pass in this process, as a user meets it every epoch: iterator creation to the last batch.

Run by ``benchmarks/dataloader.py`` in a fresh process per repetition, with our venv (``--impl ours`` and
``--impl ceiling``) or the lerobot side venv (``--impl lerobot``, ``benchmarks/setup_lerobot_venv.sh``); prints one
JSON line. The query: the given episodes, action horizon ``--horizon``, the current state, ``--camera-frames``
frames of ``--camera`` ending at the current one (1: the current frame; more: a video model's window, which
overlaps the windows of neighbouring samples), uint8, batch ``--batch-size``, the given positions in the given
order. The defaults are the lingzu query of issue 3 (``state`` / ``actions`` / ``image``, horizon 50, one frame).

- ours: ``lerobot_datasets`` through its factory (default strategy) read by ``ResumableLoader`` (what the
  trainer uses: per-sample seeding, persistent workers, the batch's frames decoded together per file
  (``LeRobotDataset.decode_batch``), ``collate_samples``, small-tensor transport). ``--per-sample`` reads each
  sample's frames on its own (the path before batched decoding), for comparison.
- lerobot: ``lerobot.datasets.lerobot_dataset.LeRobotDataset`` (``video_backend="torchcodec"``,
  ``return_uint8=True``) under a plain DataLoader with its default collate.
- ceiling: the frames the ``ours`` pass returns, decoded by torchcodec alone in a tight loop (``decode_ceiling``
  in ``benchmarks/decode_ceiling.py``), with ``--workers`` processes side by side.

Timed from before the dataset is built: ``build_s`` (dataset construction), ``first_batch_s`` (iterator
creation to the first batch, including worker start-up) and ``pass_s`` (iterator creation to the last batch).
``peak_rss_mib``: VmHWM of each worker, read as the last batch arrives (of the process with 0 workers).
``cpu_s``: CPU seconds (user + system) the pass cost, iterator creation to the last batch: this process's plus
each worker's whole life (they start with the iterator), read as the last batch arrives; on a host shared with
other jobs ``items_per_cpu_s`` / ``frames_per_cpu_s`` are the figures to compare (wall time then partly measures
the neighbours). ``frames``: camera frames the pass returns (items x camera frames); ``load_avg``: the 1-minute
load average at the end of the pass.

    python benchmarks/loader_pass.py --impl ours --workers 2 --dataset DIR --episodes 3,4,5 --positions 0,5,17,...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
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


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (``/proc``, so it works for DataLoader workers too)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _info(root: str) -> dict[str, Any]:
    with open(Path(root) / "meta" / "info.json") as f:
        return json.load(f)


def _camera_offsets(frames: int, fps: float) -> list[float]:
    """``frames`` offsets ending at the current frame (the default strategy's ``image_history``)."""
    return [-(frames - 1 - i) / fps for i in range(frames)]


def build_ours(opts: argparse.Namespace) -> Any:
    """Our dataset for the query (also what the ceiling replays)."""
    from embodied_core.config.model_config import BaseDataConfig
    from embodied_core.config.training_args import TrainingArgs
    from embodied_data.lerobot.factory import build_dataset

    info = _info(opts.dataset)
    features = info["features"]
    config = BaseDataConfig(camera_keys=[opts.camera], state_key=opts.state_key, action_key=opts.action_key,
                            state_dim=int(features[opts.state_key]["shape"][-1]),
                            action_dim=int(features[opts.action_key]["shape"][-1]), action_horizon=opts.horizon,
                            state_history=1, image_history=opts.camera_frames)
    args = TrainingArgs(model_name="benchmark", dataset_path=opts.dataset, split=",".join(map(str, opts.episodes)),
                        lerobotdataset_version=info["codebase_version"])  # the dataset's own (g1 is v2.1)
    return build_dataset(args, config)


class _PerSample:
    """A dataset's samples read one by one (no ``decode_batch``): the per-sample decoding path, for comparison."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[index]


def _ours(opts: argparse.Namespace, positions: list[int]) -> tuple[Any, Any]:
    from torch.utils.data import Subset

    from embodied_core.data.loader import ResumableLoader
    from embodied_core.data.samplers import cyclic_sampler
    from embodied_core.model_api import collate_samples

    dataset = build_ours(opts)
    source = _PerSample(dataset) if opts.per_sample else dataset
    loader = ResumableLoader(Subset(source, positions), batch_size=opts.batch_size, share_fn=cyclic_sampler(0, 1),
                             seed=0, sample_transform=None, collate_fn=collate_samples, shuffle=False,
                             drop_last=False, num_workers=opts.workers)
    return dataset, loader


def _lerobot(opts: argparse.Namespace, positions: list[int]) -> tuple[Any, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from torch.utils.data import DataLoader, Subset

    fps = float(_info(opts.dataset)["fps"])
    deltas = {opts.action_key: [i / fps for i in range(opts.horizon)]}
    if opts.camera_frames > 1:
        deltas[opts.camera] = _camera_offsets(opts.camera_frames, fps)
    dataset = LeRobotDataset(Path(opts.dataset).name, root=opts.dataset, episodes=opts.episodes,
                             video_backend="torchcodec", return_uint8=True, delta_timestamps=deltas)
    loader = DataLoader(Subset(dataset, positions), batch_size=opts.batch_size, shuffle=False,
                        num_workers=opts.workers)
    return dataset, loader


def _worker_pids(impl: str, loader: Any, iterator: Any) -> list[int]:
    """The DataLoader worker pids (private attributes: a benchmark may read them)."""
    inner = loader._loader._iterator if impl == "ours" else iterator
    return [w.pid for w in getattr(inner, "_workers", [])]


def _checksum(indices: list[int]) -> int:
    return sum((i + 1) * v for i, v in enumerate(indices))


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Library prints go to stderr: stdout carries the one JSON line."""
    saved = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = saved


def _ceiling(opts: argparse.Namespace, positions: list[int]) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from decode_ceiling import decode_ceiling, pass_reads

    started = time.perf_counter()
    dataset = build_ours(opts)
    reads = pass_reads(dataset, positions)
    built = time.perf_counter()
    result = decode_ceiling(reads, batch_size=opts.batch_size, processes=max(opts.workers, 1))
    rows = positions if dataset.index is None else [dataset.index.query(p).row for p in positions]
    indices = [int(dataset.table.columns["index"][row]) for row in rows]
    return {"impl": "ceiling", "workers": opts.workers, "items": len(positions), "build_s": built - started,
            **result, "index_checksum": _checksum(indices), "dataset_frames": len(dataset)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["ours", "lerobot", "ceiling"], required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--positions", required=True, help="comma-separated dataset positions, in reading order")
    parser.add_argument("--episodes", default=",".join(map(str, EPISODES)), help="comma-separated episodes")
    parser.add_argument("--camera", default="image")
    parser.add_argument("--state-key", default="state")
    parser.add_argument("--action-key", default="actions")
    parser.add_argument("--horizon", type=int, default=HORIZON)
    parser.add_argument("--camera-frames", type=int, default=1, help="camera frames per sample, ending now")
    parser.add_argument("--batch-size", type=int, default=BATCH)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--per-sample", action="store_true", help="ours: decode each sample's frames on its own")
    opts = parser.parse_args()
    opts.episodes = [int(e) for e in opts.episodes.split(",")]
    import torch

    torch.set_num_threads(opts.threads)
    positions = [int(p) for p in opts.positions.split(",")]
    if opts.impl == "ceiling":
        with _stdout_to_stderr():
            result = _ceiling(opts, positions)
        print(json.dumps({**result, "frames": len(positions) * opts.camera_frames, "load_avg": os.getloadavg()[0]}))
        return
    started = time.perf_counter()
    with _stdout_to_stderr():
        dataset, loader = (_ours if opts.impl == "ours" else _lerobot)(opts, positions)
    built = time.perf_counter()
    cpu_built = time.process_time()
    iterator = iter(loader)
    batches = -(-len(positions) // opts.batch_size)
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
            cpu_s = time.process_time() - cpu_built + sum(_cpu_s(pid) for pid in pids if pid != os.getpid())
    done = time.perf_counter()
    if opts.impl == "ours":
        loader.close()
    frames = len(indices) * opts.camera_frames
    print(json.dumps({"impl": opts.impl, "workers": opts.workers, "items": len(indices), "build_s": built - started,
                      "first_batch_s": first - built, "pass_s": done - built,
                      "items_per_s": len(indices) / (done - built), "frames": frames,
                      "frames_per_s": frames / (done - built), "cpu_s": cpu_s,
                      "items_per_cpu_s": len(indices) / cpu_s, "frames_per_cpu_s": frames / cpu_s, "peak_rss_mib": rss,
                      "index_checksum": _checksum(indices), "dataset_frames": len(dataset),
                      "load_avg": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
