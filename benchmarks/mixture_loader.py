"""Throughput of a 3-entry dataset mixture against the same datasets read one by one (issue 24).

Entries (shared datasets of three layouts, default strategy, pi05_tiny's transforms built for each entry with its
own statistics, as ``embodied train`` builds them): ``lerobot_written/v30`` (v3.0, 2 cameras 120x160 / 72x96),
``g1_inspire_v21`` episodes 10-19 (v2.1, 1 camera 480x640), ``lingzu_pi05_v30`` episodes 3-6, 10-12 (v3.0, 1 camera
480x640, keys mapped with ``data:`` overrides). Equal weights and ``samples_per_epoch`` = 3 x ``--items``, so the
mixture reads ``--items`` samples of each entry, interleaved by its schedule; one by one, each entry's own loader
(``entry_run_config``: the same flags, data section, statistics and transform) reads ``--items`` samples of it.

Both go through the trainer's own data path (``embodied_core.trainer.components.build_data``): ResumableLoader,
seeded per-sample transforms, collate, batch 8, DataLoader workers 0 and 2; one whole pass from iterator creation
to the last batch, mixture and one-by-one alternating, ``--rounds`` each, median. Printed per worker count: items
per wall second and per CPU second of the loader's processes (main + workers; the figure to compare on a host
shared with other jobs), and the mixture's cost. Goal: the mixture costs < 10% of the one-by-one throughput.

    .venv/bin/python benchmarks/mixture_loader.py [--items 160] [--workers 0 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DATASETS = Path(os.environ.get("SHARED_DATA_DIR", REPO.parent / "shared")) / "datasets"


def _mixture(items: int) -> dict[str, Any]:
    return {"weighting": "dataset", "samples_per_epoch": 3 * items, "entries": [
        {"path": str(DATASETS / "lerobot_written" / "v30"), "embodiment": "arm"},
        {"path": str(DATASETS / "g1_inspire_v21"), "episodes": "10-19", "lerobotdataset_version": "v2.1",
         "embodiment": "g1"},
        {"path": str(DATASETS / "lingzu_pi05_v30"), "episodes": "3-6,10-12", "embodiment": "lingzu",
         "data": {"state_key": "state", "action_key": "actions", "camera_keys": ["image"]}}]}


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pass(loader: Any, items: int) -> tuple[float, float, float, int]:
    """Reading ``items`` samples: (wall seconds, CPU seconds of this process and its workers, wall seconds after
    the first batch, samples after the first batch)."""
    import psutil

    me = psutil.Process()
    start_wall, start_cpu = time.perf_counter(), _cpu_seconds(os.getpid())
    seen, cpu_workers, first = 0, 0.0, None
    iterator = iter(loader)
    while seen < items:
        batch = next(iterator)
        seen += int(batch.tokens.shape[0])
        if first is None:
            first = (time.perf_counter(), seen)
        if seen >= items:  # workers end with the loader: read their CPU time before closing it
            cpu_workers = sum(_cpu_seconds(c.pid) for c in me.children())
    end = time.perf_counter()
    loader.close()
    assert first is not None
    return end - start_wall, _cpu_seconds(os.getpid()) - start_cpu + cpu_workers, end - first[0], seen - first[1]


def _loaders(config: Any, workers: int) -> tuple[Any, list[Any]]:
    import attrs

    from embodied_core.config.mixture_resolve import entry_run_config
    from embodied_core.config.resolve import model_spec
    from embodied_core.distributed.base import SingleProcessStrategy
    from embodied_core.trainer.components import build_data

    config = attrs.evolve(config, training=attrs.evolve(config.training, num_workers=workers))
    spec = model_spec(config.model_name)
    strategy = SingleProcessStrategy(config.training)
    mixture = build_data(config, spec, strategy).loader
    single = [build_data(entry_run_config(config, i), spec, strategy).loader
              for i in range(len(config.data_mixture.entries))]
    return mixture, single


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=160, help="samples of each entry per pass (default 160)")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2], help="DataLoader workers (default 0 2)")
    parser.add_argument("--rounds", type=int, default=3, help="passes of each kind, alternating (default 3)")
    args = parser.parse_args(argv)

    import torch

    from embodied_core.config.resolve import load_config

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "mix.yaml"
        file.write_text(yaml.safe_dump(_mixture(args.items)))
        config = load_config("pi05_tiny", training={"dataset_mixture": str(file), "video_backend": "pyav",
                                                    "per_device_batch_size": 8, "seed": 0},
                             overrides=["model.max_state_dim=64", "model.max_action_dim=64",
                                        "model.max_token_len=256"])
        print(f"3 entries x {args.items} samples, pi05_tiny transforms per entry, batch 8, rounds {args.rounds}")
        print("items/s (whole passes, wall and per CPU second; steady: after each loader's first batch, which the "
              "one-by-one reading pays three times)")
        print(f"{'workers':>7}  {'mixture':>8} {'one by one':>10}  {'per CPU s':>9} {'one by one':>10}  "
              f"{'steady':>7} {'one by one':>10}  {'cost: wall':>10} {'CPU':>6} {'steady':>7}")
        for workers in args.workers:
            mix, one = [], []
            for _ in range(args.rounds):
                mixture, singles = _loaders(config, workers)
                wall, cpu, steady, steady_items = _pass(mixture, 3 * args.items)
                mix.append((wall, cpu, steady_items / steady))
                times = [_pass(loader, args.items) for loader in singles]
                one.append((sum(t[0] for t in times), sum(t[1] for t in times),
                            sum(t[3] for t in times) / sum(t[2] for t in times)))
            items = 3 * args.items
            m_wall, m_cpu, m_steady = (statistics.median(r[k] for r in mix) for k in range(3))
            o_wall, o_cpu, o_steady = (statistics.median(r[k] for r in one) for k in range(3))
            print(f"{workers:>7}  {items / m_wall:>8.1f} {items / o_wall:>10.1f}  {items / m_cpu:>9.1f} "
                  f"{items / o_cpu:>10.1f}  {m_steady:>7.1f} {o_steady:>10.1f}  {100 * (m_wall / o_wall - 1):>9.1f}% "
                  f"{100 * (m_cpu / o_cpu - 1):>5.1f}% {100 * (o_steady / m_steady - 1):>6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
