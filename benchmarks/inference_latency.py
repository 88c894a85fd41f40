"""Inference latency: our action sampling next to lerobot 0.6.1's, and our policy's own overheads.

    .venv/bin/python benchmarks/inference_latency.py [--model pi05 smolvla xvla groot_n1_7 fastwam] [--size tiny]
        [--rounds 3] [--calls 20] [--warmup 3] [--no-compile] [--policy] [--json [PATH]]

Part 1, per model, the same network as ``benchmarks/vs_lerobot.py`` builds (``benchmarks/lerobot_cases``: lerobot's
weights through our strict loader, the same observation batch): the time of one action-chunk sample, lerobot's
module (``PI05Pytorch.sample_actions``, ``VLAFlowMatching.sample_actions``, ``XVLAModel.generate_actions``,
``GR00TN17ActionHead.get_action``, ``FastWAM.infer_action`` per element: what ``select_action`` /
``predict_action_chunk`` run once the processors have made the batch) vs ours (``sample_actions``; ``--compile``:
the trainer's regional ``compile_blocks``, compiled at start and warmed up before timing), with torch's RNG seeded
the same before every call so both sample from the same noise. Fresh process per measurement, interleaved over
``--rounds`` (order reversed every other round); p50/p99 per measurement, the p50 ratio ours / lerobot per round
(median and spread), denoising steps/s of the whole call (steps / p50), the max |difference| of the sampled actions,
and the FLOPs of one sample on each side (torch's ``FlopCounterMode``): ours at or below lerobot's FLOPs means ours
does no more work per step (pi0.5 and SmolVLA cache the prefix's keys and values once and reuse them at every
denoising step, in lerobot and in ours; FastWAM prefills the first frame's video keys/values once; a port that re-ran
them per step would show here). For pi0.5 and SmolVLA also the sampling loop alone: the time inside each side's
per-step function (ours ``cached_velocity``, lerobot's ``denoise_step``, timed by a wrapper the measurement process
puts on the class), summed per call; ``loop steps/s`` = steps / its p50, and the prefix pass (vision, language, the
keys/values the steps read) is the rest of the call.

Part 2 (``--policy``), ours only, pi05_tiny trained 2 steps on ``embodied data synth`` output (``serve_latency.py``'s
checkpoint): ``load_policy(...).predict_action(observation)`` p50/p99 (raw observation in, unnormalized chunk out),
the model's ``sample_actions`` alone on the prepared batch (so predict_action's pre/post-processing shows), an
``embodied serve`` request (openpi protocol, server in a child process with the same thread count; the server's own
``infer_ms`` / ``queue_ms`` too) and, unless ``--no-compile``, ``predict_action`` of a second copy of the policy with
``compile_blocks`` (compiled once at start, warmed up before timing). Per observation every variant runs once, in
the next of all their orders in turn, so none always follows another (a call right after the served request, whose
server process ran meanwhile, is measurably slower on a shared machine). The serve overhead is the request's p50
over the direct p50; the transport share, the request's p50 less the server's own ``infer_ms`` p50 over the direct
p50, leaves out how fast the server process happens to compute (another job sharing its core slows only it).

On CPU both sides run one intra-op thread by default; the load average is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.lerobot_cases import load_case  # noqa: E402
from benchmarks.lerobot_cases.runner import ensure_inputs, print_record, run_predict, sized  # noqa: E402

DEFAULT_LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
PREDICT_MODELS = ("pi05", "smolvla", "xvla", "groot_n1_7", "fastwam")
Key = tuple[str, bool]


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ---------------------------------------------------------------------------------------------- part 1
def _measure(python: Path, role: str, model: str, opts: argparse.Namespace, work: Path, *,
             compile_: bool) -> dict[str, Any]:
    argv = [str(python), str(Path(__file__).resolve()), "--role", role, "--work", str(work), "--model", model,
            "--size", opts.size, "--device", opts.device, "--calls", str(opts.calls), "--warmup", str(opts.warmup),
            *(["--threads", str(opts.threads)] if opts.threads else []), *(["--side-compile"] if compile_ else [])]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=opts.timeout, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{model} {role} (compile={compile_}) failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def compare_model(model: str, opts: argparse.Namespace) -> dict[str, Any]:
    """Part 1 for one model: prints its rows, returns its summary."""
    from safetensors.torch import load_file

    case = load_case(model)
    size = sized(case, opts.size, None)
    plan: list[Key] = [("lerobot", False), ("ours", False)] + ([("ours", True)] if opts.compile else [])
    runs: dict[Key, list[dict[str, Any]]] = {key: [] for key in plan}
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ensure_inputs(case, size, work / model)
        for index in range(opts.rounds):
            for role, compiled in (plan if index % 2 == 0 else plan[::-1]):
                python = Path(sys.executable) if role == "ours" else opts.lerobot_python
                runs[(role, compiled)].append(_measure(python, role, model, opts, work, compile_=compiled))
        actions = {key: load_file(str(work / model / runs[key][-1]["actions_file"]))["actions"] for key in plan}
    steps = SAMPLING_STEPS[model]
    base = runs[("lerobot", False)]
    print(f"{model} {opts.size} ({case.describe(size)}), {opts.device}; {opts.calls} calls x {opts.rounds} "
          f"fresh-process rounds, interleaved; load average {before:.1f} -> {os.getloadavg()[0]:.1f}; "
          f"{steps} denoising steps per call")
    rows: dict[str, dict[str, Any]] = {}
    for key, values in runs.items():
        role, compiled = key
        label = f"{role} {'compiled' if compiled else 'eager'}"
        p50s = [statistics.median(r["latencies_ms"]) for r in values]
        ratios = [p / statistics.median(b["latencies_ms"]) for p, b in zip(p50s, base, strict=True)]
        p50 = statistics.median(p50s)
        p99 = statistics.median(percentile(r["latencies_ms"], 0.99) for r in values)
        diff = float((actions[key] - actions[("lerobot", False)]).abs().max())
        flops = values[0]["flops"]
        rows[label] = {"p50_ms": p50, "p99_ms": p99, "ratio": statistics.median(ratios),
                       "ratio_spread": [min(ratios), max(ratios)], "steps_per_s": steps / p50 * 1e3,
                       "actions_max_abs_diff": diff, "gflop_per_call": flops / 1e9}
        loop = ""
        if all("loop_ms" in r for r in values):
            loop_p50 = statistics.median(statistics.median(r["loop_ms"]) for r in values)
            rows[label].update(loop_p50_ms=loop_p50, loop_steps_per_s=steps / loop_p50 * 1e3)
            loop = f" (loop alone {loop_p50:6.2f} ms: {steps / loop_p50 * 1e3:7.1f} steps/s)"
        print(f"  {label:17s} p50 {p50:8.2f} ms  p99 {p99:8.2f} ms | {rows[label]['ratio']:.2f}x lerobot "
              f"[{min(ratios):.2f}-{max(ratios):.2f}] | {rows[label]['steps_per_s']:7.1f} steps/s{loop} | "
              f"actions max|diff| {diff:.1e} | {flops / 1e9:.4f} GFLOP per call")
    flop_ratio = rows["ours eager"]["gflop_per_call"] / max(rows["lerobot eager"]["gflop_per_call"], 1e-12)
    print(f"  ours / lerobot FLOPs per call: {flop_ratio:.3f}")
    return {"model": model, "size": opts.size, "eager_ratio": rows["ours eager"]["ratio"],
            "compiled_ratio": rows["ours compiled"]["ratio"] if "ours compiled" in rows else None,
            "actions_max_abs_diff": rows["ours eager"]["actions_max_abs_diff"], "flop_ratio": flop_ratio,
            "rows": rows}


SAMPLING_STEPS = {"pi05": 10, "smolvla": 10, "xvla": 10, "groot_n1_7": 4, "fastwam": 10}
"""Denoising steps of one sample at the cases' configs (lerobot's defaults, which ours equal)."""

STEP_FUNCTIONS: dict[tuple[str, bool], tuple[str, str, str]] = {
    ("pi05", True): ("embodied_models.pi05.modeling", "Pi05Model", "cached_velocity"),
    ("pi05", False): ("lerobot.policies.pi05.modeling_pi05", "PI05Pytorch", "denoise_step"),
    ("smolvla", True): ("embodied_models.smolvla.modeling", "SmolVLAModel", "cached_velocity"),
    ("smolvla", False): ("lerobot.policies.smolvla.modeling_smolvla", "VLAFlowMatching", "denoise_step"),
}
"""(model, ours) -> (module, class, method): the one denoising step of the prefix-cached samplers, the expert
reading the prefix cache (both sides call it through ``self``, so a wrapper on the class sees every step)."""


@contextlib.contextmanager
def timed_steps(model: str, role: str) -> Iterator[list[float] | None]:
    """Yields the list the wrapped per-step function of ``model`` on ``role``'s side appends its durations (ms)
    to, or None where :data:`STEP_FUNCTIONS` names none; the class is restored on exit."""
    import importlib
    import time

    where = STEP_FUNCTIONS.get((model, role == "ours"))
    if where is None:
        yield None
        return
    owner = getattr(importlib.import_module(where[0]), where[1])
    original = getattr(owner, where[2])
    durations: list[float] = []

    @functools.wraps(original)
    def step(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        out = original(*args, **kwargs)
        durations.append((time.perf_counter() - started) * 1e3)
        return out

    setattr(owner, where[2], step)
    try:
        yield durations
    finally:
        setattr(owner, where[2], original)


# ---------------------------------------------------------------------------------------------- part 2
def policy_overheads(opts: argparse.Namespace) -> dict[str, Any]:
    """Part 2: pi05_tiny's policy, direct and served (see the module doc). Per observation every variant runs once,
    the order cycling through all permutations of the variants, so load from other jobs and the cache state a
    previous call leaves hit them alike."""
    import itertools
    import time

    import torch

    from benchmarks.serve_latency import _pi05_checkpoint, _serve
    from embodied_core import load_policy
    from embodied_core.trainer.compile import compile_blocks
    from embodied_eval import RemotePolicy

    before = os.getloadavg()[0]
    results: dict[str, list[float]] = {name: [] for name in ("predict_action", "sample_actions", "serve request",
                                                              "server infer", "server queue")}
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint, episode = _pi05_checkpoint(Path(tmp) / "pi05")
        observations = list(episode())
        items = [observations[i % len(observations)] for i in range(opts.warmup + opts.calls)]
        policy = load_policy(checkpoint)
        transforms = policy.transforms
        batches = [transforms.collate_fn([transforms.sample_transform(policy.observation_to_sample(o))])
                   for o in items]

        def sample(index: int) -> Any:
            with torch.no_grad():
                return policy.model.sample_actions(batches[index])

        variants: dict[str, Any] = {"predict_action": lambda i: policy.predict_action(items[i]),
                                    "sample_actions": sample}
        if opts.compile:
            compiled = load_policy(checkpoint)
            compile_blocks(compiled.model)  # once at start; the first (untimed) calls compile
            for item in items[:opts.warmup]:
                compiled.predict_action(item)
            variants["predict_action compiled"] = lambda i: compiled.predict_action(items[i])
            results["predict_action compiled"] = []
        proc, url = _serve(checkpoint, opts.threads or 1)
        try:
            remote = RemotePolicy(url)
            variants["serve request"] = lambda i: remote.predict_action(items[i])
            orders = list(itertools.permutations(variants))
            for index in range(len(items)):
                for name in orders[index % len(orders)]:
                    started = time.perf_counter()
                    variants[name](index)
                    elapsed = (time.perf_counter() - started) * 1e3
                    if index >= opts.warmup:
                        results[name].append(elapsed)
                if index >= opts.warmup:
                    results["server infer"].append(remote.last_timing["infer_ms"])
                    results["server queue"].append(remote.last_timing["queue_ms"])
            remote.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"pi05_tiny policy (serve_latency.py's checkpoint), {opts.calls} calls each after {opts.warmup} warm-up, "
          f"interleaved per observation (order cycling through the permutations); load average {before:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")
    summary: dict[str, Any] = {}
    for name, values in results.items():
        summary[name] = {"p50_ms": statistics.median(values), "p99_ms": percentile(values, 0.99)}
        print(f"  {name:24s} p50 {summary[name]['p50_ms']:8.2f} ms  p99 {summary[name]['p99_ms']:8.2f} ms")
    direct = summary["predict_action"]["p50_ms"]
    summary["serve_overhead"] = summary["serve request"]["p50_ms"] / direct - 1
    summary["transport_ms"] = summary["serve request"]["p50_ms"] - summary["server infer"]["p50_ms"]
    summary["transport_share"] = summary["transport_ms"] / direct
    summary["pre_post_ms"] = direct - summary["sample_actions"]["p50_ms"]
    print(f"  serve overhead over direct predict_action: {summary['serve_overhead']:+.1%} p50; request - server's "
          f"own infer: {summary['transport_ms']:.2f} ms = {summary['transport_share']:.1%} of the direct p50 (the "
          "server process runs the same predict_action, but on a shared machine not always as fast as this one); "
          f"predict_action's pre/post-processing {summary['pre_post_ms']:.2f} ms p50")
    return summary


# ---------------------------------------------------------------------------------------------- entry
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", nargs="*", choices=PREDICT_MODELS, default=list(PREDICT_MODELS))
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20, help="timed calls per measurement")
    parser.add_argument("--warmup", type=int, default=3, help="untimed first calls (compilation happens here)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default on CPU: 1)")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip ours with compile_blocks")
    parser.add_argument("--policy", action="store_true", help="also part 2: our policy's and serve's overheads")
    parser.add_argument("--lerobot-python", type=Path, default=DEFAULT_LEROBOT_PYTHON)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per measurement process")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                        help="print the summary as one JSON object on the last line (and write it to PATH)")
    parser.add_argument("--role", choices=["ours", "lerobot"], help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--side-compile", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.threads is None and opts.device == "cpu":
        opts.threads = 1
    if opts.role and len(opts.model) != 1:
        parser.error("a side process (--role) takes one --model")
    return opts


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(argv)
    if opts.threads:
        import torch

        torch.set_num_threads(opts.threads)
    if opts.role:
        name = opts.model[0]
        size = sized(load_case(name), opts.size, None)
        with timed_steps(name, opts.role) as durations:
            record = run_predict(name, opts.role, size=size, work=Path(opts.work) / name, device=opts.device,
                                 calls=opts.calls, warmup=opts.warmup, compile_model=opts.side_compile)
        if durations is not None:
            # warm-up calls, timed calls, then the FLOP-counting call: keep the timed calls' steps
            steps = SAMPLING_STEPS[name]
            if len(durations) != (opts.warmup + opts.calls + 1) * steps:
                raise SystemExit(f"{name} {opts.role}: {len(durations)} denoising steps over "
                                 f"{opts.warmup + opts.calls + 1} calls, expected {steps} per call")
            timed = durations[opts.warmup * steps:(opts.warmup + opts.calls) * steps]
            record["loop_ms"] = [sum(timed[i:i + steps]) for i in range(0, len(timed), steps)]
        print_record({"model": name, **record})
        return
    if opts.model and not opts.lerobot_python.exists():
        raise SystemExit(f"{opts.lerobot_python} not found: run bash benchmarks/setup_lerobot_venv.sh first")
    summary: dict[str, Any] = {"models": [compare_model(m, opts) for m in opts.model]}
    if opts.policy:
        summary["policy"] = policy_overheads(opts)
    if opts.json is not None:
        line = json.dumps(summary)
        if opts.json != "-":
            Path(opts.json).write_text(line + "\n")
        print(line)


if __name__ == "__main__":
    main()
