"""A training step of every model lerobot 0.6.1 also ships, ours vs lerobot's: same weights, inputs, noise and time.

    .venv/bin/python benchmarks/vs_lerobot.py --model {pi05,smolvla,xvla,groot_n1_7,fastwam,lingbot_va}
        [--size tiny|mid] [--rounds 3] [--steps 5] [--warmup 2] [--no-compile] [--lerobot-compile] [--json [PATH]]
    .venv/bin/python benchmarks/vs_lerobot.py --model pi05 --size full --device cuda --dtype bfloat16 --batch-size 32

One step = forward, backward, AdamW (lr 1e-4, weight decay 0.01) over the parameters lerobot's defaults train,
zero_grad, on one fixed batch (``benchmarks/lerobot_cases/runner.py``). lerobot's module is built in its side venv
(``benchmarks/setup_lerobot_venv.sh``) and saves its ``state_dict`` (and config, where lerobot has one); ours loads
that file through our strict loader, so the weights are lerobot's and the losses must agree to float tolerance.
What each model's step is, and its sizes, are in ``benchmarks/lerobot_cases/<model>.py``.

Each measurement is a fresh process (ours in our venv, lerobot's in the side venv), interleaved over ``--rounds``
(the order reverses every other round, so a drift in the machine's load hits both sides alike): lerobot eager,
ours eager, ours with ``--compile`` (the trainer's regional ``compile_blocks``) and, with ``--lerobot-compile``
where lerobot has its own switch (pi05, smolvla), lerobot's ``compile_model``. A ratio is ours / lerobot eager,
taken per round and reported as the median over rounds with its spread (min-max), by wall clock and by the
measured process's CPU time (the steadier figure when other jobs share the machine). Also printed: the loss
difference relative to lerobot's (max over the steps, so the AdamW update is checked too), peak memory (CUDA:
``max_memory_allocated``; CPU: peak RSS above the level before the first step) and on CUDA the MFU (FLOPs of one
step counted by torch's ``FlopCounterMode`` over ``--peak-tflops``). On CPU the RSS also counts freed memory glibc
keeps in its heap, which differs by a few percent between two processes doing the same work; ``--live-peak``
measures the live bytes instead (every large block mapped and unmapped on its own; slower steps). ``--json``
prints one JSON object as the last line: ``{"model", "size", "eager_ratio", "compiled_ratio", "loss_rel_diff",
"peak_mem_ratio", ...}``; with a path it also writes it there. ``--profile DIR`` writes a torch.profiler op table
and trace of one step per side.

On CPU both sides run one intra-op thread by default (steady on a shared host); the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks.lerobot_cases from the checkout (both venvs)
    sys.path.insert(0, str(REPO))

from benchmarks.lerobot_cases import MODELS, load_case  # noqa: E402
from benchmarks.lerobot_cases.runner import ensure_inputs, print_record, run_side, sized  # noqa: E402

DEFAULT_LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
LIVE_PEAK_MMAP_THRESHOLD = 128 * 1024
"""``--live-peak``: glibc's own starting mmap threshold, fixed (setting it turns the dynamic threshold off)."""
Key = tuple[str, bool]


# ---------------------------------------------------------------------------------------------- side process
def side_main(opts: argparse.Namespace) -> None:
    """``--role``: one side of one or more models in this process, one JSON line per model (``--work``/<model>)."""
    import torch

    if opts.threads:
        torch.set_num_threads(opts.threads)
    for name in opts.model:
        size = sized(load_case(name), opts.size, opts.batch_size)
        record = run_side(name, opts.role, size=size, work=Path(opts.work) / name, device=opts.device,
                          dtype=opts.dtype, steps=opts.steps, warmup=opts.warmup, compile_model=opts.side_compile,
                          count_flops=opts.count_flops, profile=opts.profile, save_actions=opts.save_actions)
        print_record({"model": name, **record})


def _measure(python: Path, role: str, opts: argparse.Namespace, work: Path, *, compile_: bool,
             count_flops: bool = False, profile: bool = False) -> dict[str, Any]:
    argv = [str(python), str(Path(__file__).resolve()), "--role", role, "--work", str(work), "--model", opts.model[0],
            "--size", opts.size, "--device", opts.device, "--dtype", opts.dtype, "--steps", str(opts.steps),
            "--warmup", str(opts.warmup), *(["--batch-size", str(opts.batch_size)] if opts.batch_size else []),
            *(["--threads", str(opts.threads)] if opts.threads else []), *(["--side-compile"] if compile_ else []),
            *(["--count-flops"] if count_flops else []), *(["--profile", str(opts.profile)] if profile else [])]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if opts.live_peak:
        env["MALLOC_MMAP_THRESHOLD_"] = str(LIVE_PEAK_MMAP_THRESHOLD)
    result = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=opts.timeout, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{opts.model[0]} {role} (compile={compile_}) failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------- driver
def plan_for(opts: argparse.Namespace, case: Any) -> list[Key]:
    """The measurements of one round, lerobot eager first (its first run writes the weights)."""
    plan: list[Key] = [("lerobot", False), ("ours", False)]
    if opts.compile:
        plan.append(("ours", True))
    if opts.lerobot_compile and case.LEROBOT_COMPILE:
        plan.append(("lerobot", True))
    return plan


def measure_all(opts: argparse.Namespace, case: Any, work: Path) -> dict[Key, list[dict[str, Any]]]:
    """Every measurement of every round, interleaved (the order reverses every other round)."""
    plan = plan_for(opts, case)
    runs: dict[Key, list[dict[str, Any]]] = {key: [] for key in plan}
    for index in range(opts.rounds):
        for role, compiled in (plan if index % 2 == 0 else plan[::-1]):
            python = Path(sys.executable) if role == "ours" else opts.lerobot_python
            first = index == 0
            runs[(role, compiled)].append(_measure(
                python, role, opts, work, compile_=compiled, profile=first and opts.profile is not None,
                count_flops=first and role == "ours" and not compiled and (opts.device.startswith("cuda")
                                                                           or opts.count_flops)))
    return runs


def _ratio(runs: dict[Key, list[dict[str, Any]]], key: Key, field: str = "step_s") -> tuple[float, float, float]:
    """Median and spread over rounds of (this run's step time) / (lerobot eager's in the same round); ``field``
    step_s (wall clock) or step_cpu_s (CPU time)."""
    ratios = [r[field] / base[field] for r, base in zip(runs[key], runs[("lerobot", False)], strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def _loss_rel_diff(values: list[dict[str, Any]], reference: list[float]) -> float:
    return max(abs(a - b) / max(abs(b), 1e-12) for r in values for a, b in zip(r["losses"], reference, strict=True))


def summarize(runs: dict[Key, list[dict[str, Any]]], case: Any, size: dict[str, Any],
              opts: argparse.Namespace, load: tuple[float, float]) -> dict[str, Any]:
    """Prints the comparison; returns the summary (the JSON object)."""
    name = opts.model[0]
    reference = runs[("lerobot", False)][0]["losses"]
    step = {k: statistics.median(r["step_s"] for r in v) for k, v in runs.items()}
    peak = {k: max(r["peak_mib"] for r in v) for k, v in runs.items()}
    flops = runs[("ours", False)][0].get("flops")
    mode = runs[("lerobot", False)][0]["mode"]
    cuda = opts.device.startswith("cuda")
    print(f"{name} {opts.size} ({case.describe(size)}), {opts.dtype}, {opts.device}, "
          f"{'fwd+bwd+AdamW' if mode == 'train' else 'forward only (lerobot cannot train it on this device)'}; "
          f"median of {opts.steps} steps x {opts.rounds} fresh-process rounds, interleaved; load average "
          f"{load[0]:.1f} -> {load[1]:.1f}" + (f"; {flops / 1e12:.4f} TFLOP per step" if flops else "")
          + ("; --live-peak: fixed mmap threshold, the RSS follows live bytes (slower steps)" if opts.live_peak
             else ""))
    rows: dict[str, dict[str, Any]] = {}
    for key, values in runs.items():
        role, compiled = key
        label = f"{role} {'compiled' if compiled else 'eager'}"
        ratio, cpu = _ratio(runs, key), _ratio(runs, key, "step_cpu_s")
        diff = _loss_rel_diff(values, reference)
        mfu = flops / step[key] / (opts.peak_tflops * 1e12) if cuda and flops else None
        rows[label] = {"step_ms": step[key] * 1e3, "ratio": ratio[0], "ratio_spread": [ratio[1], ratio[2]],
                       "cpu_ratio": cpu[0], "cpu_ratio_spread": [cpu[1], cpu[2]],
                       "loss_rel_diff": diff, "peak_mib": peak[key], "mfu": mfu,
                       "first_step_s": statistics.median(r["first_s"] for r in values)}
        print(f"  {label:17s} step {step[key] * 1e3:9.1f} ms | {ratio[0]:.2f}x lerobot eager [{ratio[1]:.2f}-"
              f"{ratio[2]:.2f}] | CPU time {cpu[0]:.2f}x [{cpu[1]:.2f}-{cpu[2]:.2f}] | loss rel diff {diff:.1e} | "
              f"peak {'memory' if cuda else 'step RSS'} "
              f"{peak[key]:.0f} MiB | first step {rows[label]['first_step_s']:.1f} s"
              + (f" | MFU {mfu:.1%}" if mfu is not None else ""))
    for note in sorted({n for v in runs.values() for r in v for n in r["notes"]}):
        print(f"  note: {note}")
    compiled = rows.get("ours compiled")
    base_peak = peak[("lerobot", False)]
    summary = {"model": name, "size": opts.size, "eager_ratio": rows["ours eager"]["ratio"],
               "compiled_ratio": compiled["ratio"] if compiled else None,
               "loss_rel_diff": rows["ours eager"]["loss_rel_diff"],
               "peak_mem_ratio": peak[("ours", False)] / base_peak if base_peak > 0 else None,
               "compiled_loss_rel_diff": compiled["loss_rel_diff"] if compiled else None,
               "eager_ratio_spread": rows["ours eager"]["ratio_spread"],
               "eager_cpu_ratio": rows["ours eager"]["cpu_ratio"],
               "compiled_cpu_ratio": compiled["cpu_ratio"] if compiled else None,
               "compiled_ratio_spread": compiled["ratio_spread"] if compiled else None,
               "mode": mode, "device": opts.device, "dtype": opts.dtype, "batch": size["batch"],
               "rounds": opts.rounds, "steps": opts.steps, "threads": opts.threads, "load_average": list(load),
               "tflop_per_step": flops / 1e12 if flops else None, "rows": rows}
    if "lerobot compiled" in rows and compiled:
        summary["compiled_vs_lerobot_compiled"] = compiled["step_ms"] / rows["lerobot compiled"]["step_ms"]
        print(f"  ours compiled / lerobot compiled: {summary['compiled_vs_lerobot_compiled']:.2f}x")
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", nargs="+", choices=MODELS, required=True,
                        help="the model (one; a side process (--role) takes several)")
    parser.add_argument("--size", default="mid", help="tiny, mid (and full for pi05)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the size's batch")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="bfloat16: autocast on both sides (fp32 weights)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps (compilation happens here)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads of both sides (default on CPU: 1, steady on a shared host)")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip ours with --compile")
    parser.add_argument("--lerobot-compile", action="store_true",
                        help="also lerobot with its own compile_model, where it has one (pi05, smolvla)")
    parser.add_argument("--lerobot-python", type=Path, default=DEFAULT_LEROBOT_PYTHON)
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="for MFU on CUDA (H200 bf16 dense: 989)")
    parser.add_argument("--count-flops", action="store_true", help="count FLOPs on CPU too (one more step)")
    parser.add_argument("--profile", type=Path, default=None, help="torch.profiler table + trace of one step here")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per measurement process")
    parser.add_argument("--live-peak", action="store_true",
                        help="CPU: fix glibc's mmap threshold at 128 KiB in the measured processes "
                             "(MALLOC_MMAP_THRESHOLD_), so every large block is mapped on allocation and unmapped "
                             "on free and the peak RSS follows the live bytes, not how the heap happened to "
                             "fragment; the steps then run slower (both sides alike): read the memory column")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                        help="print the summary as one JSON object on the last line (and write it to PATH)")
    parser.add_argument("--role", choices=["ours", "lerobot"], help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--side-compile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--save-actions", action="store_true", help=argparse.SUPPRESS)  # side: sample once first
    opts = parser.parse_args(argv)
    if not opts.role and len(opts.model) != 1:
        parser.error("--model takes one model (run the script once per model)")
    if opts.threads is None and opts.device == "cpu":
        opts.threads = 1
    return opts


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(argv)
    if opts.role:
        return side_main(opts)
    if not opts.lerobot_python.exists():
        raise SystemExit(f"{opts.lerobot_python} not found: run bash benchmarks/setup_lerobot_venv.sh first")
    case = load_case(opts.model[0])
    size = sized(case, opts.size, opts.batch_size)
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ensure_inputs(case, size, work / opts.model[0])
        runs = measure_all(opts, case, work)
    summary = summarize(runs, case, size, opts, (before, os.getloadavg()[0]))
    if opts.json is not None:
        line = json.dumps(summary)
        if opts.json != "-":
            Path(opts.json).write_text(line + "\n")
        print(line)


if __name__ == "__main__":
    main()
