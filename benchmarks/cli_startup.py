"""Wall time of the CLI's help paths next to ``python -c "import torch"``.

Goal: ``embodied train --help`` under 0.3 s and under 0.25x of the torch import. Each command runs in a fresh
process ``--repeats`` times; the median is reported.

    .venv/bin/python benchmarks/cli_startup.py [--repeats 7] [--model tiny_flow_policy]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def _median_seconds(cmd: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--model", default="tiny_flow_policy", help="model for the per-model help")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "embodied_core.cli.main"]
    commands = {
        'python -c "import torch"': [sys.executable, "-c", "import torch"],
        "embodied --help": [*cli, "--help"],
        "embodied train --help": [*cli, "train", "--help"],
        f"embodied train --model-name {args.model} --help": [*cli, "train", "--model-name", args.model, "--help"],
    }
    results = {name: _median_seconds(cmd, args.repeats) for name, cmd in commands.items()}
    torch_time = results['python -c "import torch"']
    print(f"{'command':<55}{'median s':>10}{'x torch':>10}")
    for name, seconds in results.items():
        print(f"{name:<55}{seconds:>10.3f}{seconds / torch_time:>10.2f}")


if __name__ == "__main__":
    main()
