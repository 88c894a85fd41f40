"""MetaWorld, offline: scripted-expert demos -> train -> closed-loop success, and the same with lerobot.

Three parts (``--parts``, default all), each printing its table; everything lands in ``--json``:

1. ``single``: ``embodied data collect`` records ``--demos`` successful expert episodes of ``--task``
   (button-press-topdown-v3) at ``--image-size`` px (MetaWorld's fast look); each of ``--models`` is trained with
   ``embodied train`` (``--steps``, ``--batch-size``, ``--lr``, ``--seed``) and evaluated by ``embodied eval --env
   metaworld`` on ``--episodes`` seeded episodes (seeds from ``--eval-seed``, lerobot-eval's 1000) next to the two
   baselines (``--baselines hold,mean_action``, on the first ``--baseline-episodes`` seeds: they run every episode
   to the 500-step cap) and the scripted expert on the same seeds. Per row: success with a
   95% Wilson interval, the training command's wall time.
2. ``multi``: one policy (the first of ``--models``) on the 5 tasks of ``--multi-tasks`` (``--multi-demos`` each,
   language = each task's instruction); success per task, and the same policy with every episode's instruction
   swapped for the next task's (the instruction must select the behaviour: swapped, it should fail).
3. ``lerobot``: the single-task dataset trained by lerobot 0.6.1's ``lerobot-train`` (side venv
   ``.venv-lerobot``) with SmolVLA at smolvla_tiny's sizes (a local SmolVLM2 folder written by
   ``benchmarks/lerobot_smolvla_vlm.py``, random VLM as ours, no hub) and the same steps, batch, learning-rate
   schedule, optimizer settings and seed; its checkpoint imported by ``embodied checkpoint
   import-lerobot-smolvla`` and evaluated by our env on the same seeds; plus one ``lerobot-eval`` run of it on
   ``--lerobot-eval-episodes`` seeds next to our env with ``--render lerobot`` (lerobot-eval renders 480 x 480 in
   MetaWorld's default look, which the policy was not trained on: that pair checks the envs agree, not the policy).

Every command runs with ``--threads`` torch threads (default 1). Both trainings run the same optimizer settings
(AdamW betas 0.9/0.95, eps 1e-8, weight decay 1e-10, clip 10, lerobot's SmolVLA preset), warmup ``--warmup`` and
decay to ``--min-lr`` over ``--steps``, float32 on CPU, and each framework's own weight init and data order. Wall
times are whole commands (start-up, data loading, training, checkpointing) and CPU times their user + system
seconds; on a shared machine the CPU times are the steadier figure.

    .venv/bin/python benchmarks/metaworld_benchmark.py                       # everything, full size
    .venv/bin/python benchmarks/metaworld_benchmark.py --parts single --demos 10 --steps 200 --episodes 10
    .venv/bin/python benchmarks/metaworld_benchmark.py --parts lerobot --workdir outputs/metaworld_bench  # reuses
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EMBODIED = [sys.executable, "-m", "embodied_core.cli.main"]
DEFAULT_LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"
EASY5 = "drawer-open-v3,drawer-close-v3,window-open-v3,window-close-v3,button-press-topdown-v3"
"""Five of lerobot's easy tasks, two open/close pairs that share an object, and a button. Each task of a pair starts
from the other's goal state (drawer-close with the drawer pulled out, window-close with the window open), so the
first frame already tells the five apart: the swap (each task given the next one's instruction, a cyclic shift)
measures whether the policy follows the text over the picture. Two of the five swaps stay in the scene's pair
(drawer-open told to close the drawer, window-open told to close the window); three name an object not in view."""
CAMERA = "observation.image"
OPTIMIZER = {"beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 1e-10, "clip": 10.0}


# ---------------------------------------------------------------------------------------------- helpers
CPU_TIMES: dict[str, float] = {}
"""CPU seconds (user + system, the command and its children) of each log's command: on a shared machine a
steadier figure than the wall time."""


def run(cmd: Sequence[str], log: Path, *, env: Mapping[str, str] | None = None) -> float:
    """Runs ``cmd`` with its output in ``log``; returns the wall time (its CPU time goes to ``CPU_TIMES[log]``).
    RuntimeError with the log's tail on failure."""
    log.parent.mkdir(parents=True, exist_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.run(list(cmd), stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                              env={**os.environ, **(env or {})})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_TIMES[str(log)] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"{' '.join(map(str, cmd[:6]))} ... failed ({proc.returncode}); {log}:\n{tail}")
    return wall


def cpu_of(log: Path) -> float:
    """The CPU seconds :func:`run` measured for ``log``'s command."""
    return CPU_TIMES[str(log)]


def rate(successes: int, episodes: int) -> dict[str, Any]:
    """Success rate and its 95% Wilson interval."""
    from embodied_eval.intervals import wilson_interval

    low, high = wilson_interval(successes, episodes)
    return {"episodes": episodes, "successes": successes, "success_rate": successes / episodes,
            "success_rate_ci95": [low, high]}


def cell(r: Mapping[str, Any] | None) -> str:
    if not r:
        return "-"
    low, high = r["success_rate_ci95"]
    return f"{100 * r['success_rate']:5.1f}% [{100 * low:4.1f}, {100 * high:5.1f}] ({r['successes']}/{r['episodes']})"


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=True)]
    print(f"\n{title}")
    for line in (header, ["-" * w for w in widths], *rows):
        print("  " + " | ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)))


def save_report(opts: argparse.Namespace, report: dict[str, Any]) -> None:
    """Writes the report file now (through a temporary file, so a crash never leaves half a JSON): called after
    every part and after every stage of the long ones, so a crash loses only the stage it hit."""
    report["wall_s"] = time.perf_counter() - opts.started
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    report["cpu_s"] = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    tmp = opts.report_path.with_name(opts.report_path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2))
    tmp.replace(opts.report_path)


def collect(opts: argparse.Namespace, tasks: str, demos: int, out: Path) -> dict[str, Any]:
    """``embodied data collect`` (resumable: an existing complete folder is reused as it is)."""
    cmd = [*EMBODIED, "data", "collect", "--env", "metaworld", "--task", tasks, "--episodes", str(demos),
           "--policy", "expert", "--out", str(out), "--image-size", str(opts.image_size), "--seed",
           str(opts.collect_seed), "--no-progress"]
    wall = run(cmd, out.parent / f"{out.name}.collect.log")
    state = json.loads((out / "meta" / "collect.json").read_text())
    info = json.loads((out / "meta" / "info.json").read_text())
    return {"path": str(out), "tasks": tasks.split(","), "episodes": info["total_episodes"],
            "frames": info["total_frames"], "fps": info["fps"], "wall_s": wall, "collect": state}


def train_ours(opts: argparse.Namespace, model: str, dataset: Path, out: Path) -> float:
    """``embodied train`` with the shared settings; returns its wall time."""
    cmd = [*EMBODIED, "train", "--model-name", model, "--dataset-format", "lerobot_datasets",
           "--dataset-path", str(dataset), "--train-iters", str(opts.steps),
           "--per-device-batch-size", str(opts.batch_size), "--lr-base", str(opts.lr),
           "--lr-warmup-iters", str(opts.warmup), "--min-lr", str(opts.min_lr),
           "--adam-beta1", str(OPTIMIZER["beta1"]), "--adam-beta2", str(OPTIMIZER["beta2"]),
           "--adam-eps", str(OPTIMIZER["eps"]), "--weight-decay", str(OPTIMIZER["weight_decay"]),
           "--clip-grad", str(OPTIMIZER["clip"]), "--seed", str(opts.seed), "--dtype", "float32",
           "--num-workers", str(opts.num_workers), "--log-interval", "50", "--save-interval", str(opts.steps),
           "--output-dir", str(out), *opts.train_arg]
    return run(cmd, out.parent / f"{out.name}.train.log")


def eval_ours(opts: argparse.Namespace, checkpoint: Path, tasks: str, out: Path, *, episodes: int,
              render: str = "fast") -> dict[str, Any]:
    """``embodied eval --env metaworld``; returns eval.json."""
    cmd = [*EMBODIED, "eval", str(checkpoint), "--env", "metaworld", "--task", tasks, "--render", render,
           "--episodes", str(episodes), "--seed", str(opts.eval_seed), "--replan-steps", str(opts.replan_steps),
           "--num-envs", str(opts.num_envs), "--output-dir", str(out), "--no-progress"]
    wall = run(cmd, out.parent / f"{out.name}.eval.log")
    doc = json.loads((out / "eval.json").read_text())
    doc["command_wall_s"] = wall
    return doc


def eval_baselines(opts: argparse.Namespace, checkpoint: Path, tasks: str, episodes: int) -> dict[str, Any]:
    """``embodied eval``'s baselines (``--baselines``) for the policy folder's layout, on the first ``episodes``
    eval seeds: they fail by running every episode to the 500-step cap, so they get their own, smaller count."""
    from embodied_core import load_policy
    from embodied_eval.baselines import make_baseline
    from embodied_eval.env_options import resolve_env
    from embodied_eval.report import summarize
    from embodied_eval.rollout import RolloutSettings, run_episodes

    metadata = load_policy(checkpoint).metadata
    factory, _ = resolve_env("metaworld", flags={"task": tasks})
    probe = factory(metadata)
    hold, tasks_of_env = probe.hold_action_for, probe.tasks
    probe.close()
    settings = RolloutSettings(num_episodes=episodes, seed=opts.eval_seed, replan_steps=1)
    out = {}
    for name in filter(None, opts.baselines.split(",")):
        baseline = make_baseline(name, metadata, checkpoint=str(checkpoint), hold=hold)
        results = run_episodes(lambda b=baseline: b, lambda: factory(metadata), settings, tasks=tasks_of_env)
        summary = summarize(results)
        out[name] = {k: summary[k] for k in ("episodes", "successes", "success_rate", "success_rate_ci95")}
    return out


def expert_success(opts: argparse.Namespace, tasks: str, episodes: int) -> dict[str, Any]:
    """MetaWorld's scripted expert on the eval seeds (its actions clipped to the action space, as recorded)."""
    import numpy as np

    from embodied_eval.env_options import resolve_env

    factory, _ = resolve_env("metaworld", flags={"task": tasks, "image_size": str(opts.image_size)})
    env = factory(None)
    low, high = env.action_bounds or (-np.inf, np.inf)
    results: dict[str, list[bool]] = {}
    try:
        for task in env.tasks or (None,):
            for seed in range(opts.eval_seed, opts.eval_seed + episodes):
                env.reset(seed, task=task)
                success = False
                for _ in range(env.max_steps):
                    step = env.step(np.clip(env.expert_action(), low, high))
                    success = success or step.success
                    if step.done:
                        break
                results.setdefault(str(task), []).append(success)
    finally:
        env.close()
    every = [s for outcomes in results.values() for s in outcomes]
    return {"overall": rate(sum(every), len(every)),
            "per_task": {task: rate(sum(s), len(s)) for task, s in results.items()}}


class SwappedInstruction:
    """A policy that reads another task's instruction than the episode's: ``mapping[instruction]``."""

    def __init__(self, policy: Any, mapping: Mapping[str, str]) -> None:
        self.policy = policy
        self.mapping = dict(mapping)
        self.metadata = policy.metadata

    def predict_action(self, observation: Mapping[str, Any]) -> Any:
        return self.policy.predict_action({**observation, "task": self.mapping[observation["task"]]})

    def reset(self) -> None:
        self.policy.reset()


def eval_swapped(opts: argparse.Namespace, checkpoint: Path, tasks: str, episodes: int,
                 out: Path) -> dict[str, Any]:
    """The policy evaluated in each task with the next task's instruction (a cyclic shift of the 5), on the same
    seeds and policy seed as ``embodied eval``. Every episode is appended to ``out/episodes.jsonl`` as it ends (a
    progress line goes to stdout); the summary, with every episode, is also written to ``out/swapped.json``."""
    from embodied_core import load_policy
    from embodied_eval.env_options import resolve_env
    from embodied_eval.envs.metaworld.tasks import description
    from embodied_eval.report import summarize_tasks
    from embodied_eval.rollout import EpisodeResult, RolloutSettings, run_episodes

    names = tasks.split(",")
    texts = [description(t) for t in names]
    mapping = {texts[i]: texts[(i + 1) % len(texts)] for i in range(len(texts))}
    factory, _ = resolve_env("metaworld", flags={"task": tasks})
    first = load_policy(checkpoint, seed=0)
    settings = RolloutSettings(num_episodes=episodes, seed=opts.eval_seed, num_envs=opts.num_envs,
                               replan_steps=opts.replan_steps)
    pool = [first]

    def make_policy() -> SwappedInstruction:
        return SwappedInstruction(pool.pop() if pool else load_policy(checkpoint, seed=0), mapping)

    probe = factory(first.metadata)
    groups = probe.task_groups
    probe.close()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "episodes.jsonl"
    log.write_text("")
    done = [0]
    total = episodes * len(names)

    def on_episode(result: EpisodeResult) -> None:
        with log.open("a") as f:
            f.write(json.dumps(result.to_dict()) + "\n")
        done[0] += 1
        print(f"  swapped {done[0]}/{total}: {result.task} seed {result.seed} "
              f"{'success' if result.success else 'fail'} in {result.length} steps ({result.wall_s:.0f} s)")

    cpu_before, started = time.process_time(), time.perf_counter()
    results = run_episodes(make_policy, lambda: factory(first.metadata), settings, tasks=tuple(names),
                           on_episode=on_episode)
    doc = {"instruction_of": {names[i]: names[(i + 1) % len(names)] for i in range(len(names))},
           "instruction_text_of": {names[i]: texts[(i + 1) % len(names)] for i in range(len(names))},
           **summarize_tasks(results, groups), "wall_s": time.perf_counter() - started,
           "cpu_s": time.process_time() - cpu_before, "episodes": [r.to_dict() for r in results]}
    (out / "swapped.json").write_text(json.dumps(doc, indent=2))
    return doc


def paired(own: Sequence[Mapping[str, Any]], swapped: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per task, the episodes of the same seed under the own and the swapped instruction: how many succeeded with
    both, with the own one only, with the swapped one only, with neither; and the mean length of the successes."""
    by_key = {(e["task"], e["seed"]): e for e in own}
    out: dict[str, dict[str, Any]] = {}
    for e in swapped:
        o = by_key.get((e["task"], e["seed"]))
        if o is None:
            continue
        row = out.setdefault(e["task"], {"both": 0, "own_only": 0, "swapped_only": 0, "neither": 0,
                                         "own_success_lengths": [], "swapped_success_lengths": []})
        key = {(True, True): "both", (True, False): "own_only", (False, True): "swapped_only",
               (False, False): "neither"}[(bool(o["success"]), bool(e["success"]))]
        row[key] += 1
        if o["success"]:
            row["own_success_lengths"].append(o["length"])
        if e["success"]:
            row["swapped_success_lengths"].append(e["length"])
    return out


def success_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    s = doc["summary"]
    return {k: s[k] for k in ("episodes", "successes", "success_rate", "success_rate_ci95")}


# ---------------------------------------------------------------------------------------------- parts
def part_single(opts: argparse.Namespace, work: Path, report: dict[str, Any]) -> None:
    data = collect(opts, opts.task, opts.demos, work / "data_single")
    report["single"] = {"dataset": data, "task": opts.task, "models": {}}
    print(f"collected {data['episodes']} demos of {opts.task} ({data['frames']} frames at {opts.image_size} px) in "
          f"{data['wall_s']:.0f} s")
    expert = expert_success(opts, opts.task, opts.episodes)
    report["single"]["expert"] = expert["overall"]
    rows = [["expert (scripted)", cell(expert["overall"]), "-", "-"]]
    baselines_done = False
    for model in opts.models:
        out = work / f"single_{model}"
        entry: dict[str, Any] = {}
        try:
            entry["train_wall_s"] = train_ours(opts, model, Path(data["path"]), out)
            entry["train_cpu_s"] = cpu_of(out.parent / f"{out.name}.train.log")
            doc = eval_ours(opts, out, opts.task, work / f"single_{model}_eval", episodes=opts.episodes)
            if not baselines_done and opts.baselines and opts.baseline_episodes > 0:
                report["single"]["baselines"] = eval_baselines(opts, out, opts.task, opts.baseline_episodes)
                baselines_done = True
        except RuntimeError as exc:
            entry["error"] = str(exc)[-1500:]
            print(f"{model}: failed: {str(exc).splitlines()[0]}")
            rows.append([model, "failed", "-", "-"])
            report["single"]["models"][model] = entry
            continue
        entry |= {"success": success_of(doc), "eval_wall_s": doc["command_wall_s"],
                  "of_expert": doc["summary"]["success_rate"] / max(expert["overall"]["success_rate"], 1e-9)}
        report["single"]["models"][model] = entry
        rows.append([model, cell(entry["success"]), f"{entry['train_wall_s']:.0f}", f"{entry['train_cpu_s']:.0f}"])
    for name, value in report["single"].get("baselines", {}).items():
        rows.append([f"baseline: {name}", cell(value), "-", "-"])
    print_table(f"single task {opts.task}: {opts.demos} demos, {opts.steps} steps x batch {opts.batch_size}, "
                f"{opts.episodes} episodes (seeds {opts.eval_seed}..{opts.eval_seed + opts.episodes - 1})",
                ["policy", "success [95% CI]", "train wall s", "train CPU s"], rows)


MULTI_SHAPING = ("multi_tasks", "multi_demos", "image_size", "collect_seed", "steps", "batch_size", "lr", "warmup",
                 "min_lr", "seed", "num_workers", "train_arg", "multi_episodes", "eval_seed", "replan_steps", "models")
"""Settings that shape the multi-task figures."""


def previous_multi(opts: argparse.Namespace, report: Mapping[str, Any]) -> dict[str, Any]:
    """The multi-task stages an earlier run in the same report file finished with every setting of
    :data:`MULTI_SHAPING` equal to this run's (``{}`` when none), so a rerun after a crash resumes there."""
    previous = opts.previous_report
    settings = previous.get("settings") or {}
    if any(settings.get(k) != report["settings"][k] for k in MULTI_SHAPING):
        return {}
    return dict(previous.get("multi") or {})


def trained_to(checkpoint: Path, steps: int) -> bool:
    """Whether ``checkpoint`` loads as a policy trained for ``steps`` steps (an earlier run's, to reuse)."""
    if not checkpoint.is_dir():
        return False
    from embodied_core import load_policy

    try:
        return load_policy(checkpoint).metadata.step == steps
    except Exception as exc:  # a half-written folder: train again
        print(f"{checkpoint}: not reused ({type(exc).__name__}: {exc})")
        return False


def part_multi(opts: argparse.Namespace, work: Path, report: dict[str, Any]) -> None:
    model = opts.models[0]
    out = work / f"multi_{model}"
    earlier = previous_multi(opts, report)
    entry: dict[str, Any] = {"model": model}
    report["multi"] = entry
    data = collect(opts, opts.multi_tasks, opts.multi_demos, work / "data_multi")
    entry["dataset"] = {**data, "cpu_s": cpu_of(work / "data_multi.collect.log")}
    print(f"collected {data['episodes']} demos of {len(data['tasks'])} tasks ({data['frames']} frames) in "
          f"{data['wall_s']:.0f} s wall, {entry['dataset']['cpu_s']:.0f} s CPU")
    save_report(opts, report)
    if "train_wall_s" in earlier and trained_to(out, opts.steps):
        entry |= {k: earlier[k] for k in ("train_wall_s", "train_cpu_s")} | {"train_reused": True}
        print(f"training: reusing {out} (trained by an earlier run with the same settings)")
    else:
        entry["train_wall_s"] = train_ours(opts, model, Path(data["path"]), out)
        entry["train_cpu_s"] = cpu_of(out.parent / f"{out.name}.train.log")
    print(f"trained {model}: {entry['train_wall_s']:.0f} s wall, {entry['train_cpu_s']:.0f} s CPU")
    save_report(opts, report)
    own_dir = work / f"multi_{model}_eval"
    if entry.get("train_reused") and "tasks" in earlier and (own_dir / "eval.json").is_file():
        doc = json.loads((own_dir / "eval.json").read_text())
        entry |= {k: earlier[k] for k in ("tasks", "own_eval_wall_s", "own_eval_cpu_s") if k in earlier}
        print(f"own instruction: reusing {own_dir / 'eval.json'}")
    else:
        doc = eval_ours(opts, out, opts.multi_tasks, own_dir, episodes=opts.multi_episodes)
        entry |= {"tasks": doc["tasks"], "own_eval_wall_s": doc["command_wall_s"],
                  "own_eval_cpu_s": cpu_of(own_dir.parent / f"{own_dir.name}.eval.log")}
    print(f"own instruction: {cell(entry['tasks']['overall'])} ({entry.get('own_eval_wall_s', 0):.0f} s wall, "
          f"{entry.get('own_eval_cpu_s', 0):.0f} s CPU)")
    save_report(opts, report)
    swapped = eval_swapped(opts, out, opts.multi_tasks, opts.multi_episodes, work / f"multi_{model}_swapped")
    entry["swapped"] = {k: v for k, v in swapped.items() if k != "episodes"}
    entry["paired"] = paired(doc["episodes"], swapped["episodes"])
    print(f"instruction swapped: {cell(swapped['overall'])} ({swapped['wall_s']:.0f} s wall, "
          f"{swapped['cpu_s']:.0f} s CPU)")
    save_report(opts, report)
    started, cpu_before = time.perf_counter(), time.process_time()
    expert = expert_success(opts, opts.multi_tasks, opts.multi_episodes)
    entry["expert"] = {**expert, "wall_s": time.perf_counter() - started, "cpu_s": time.process_time() - cpu_before}
    save_report(opts, report)
    rows = [[task, cell(expert["per_task"].get(task)), cell(entry["tasks"]["per_task"].get(task)),
             f"{swapped['instruction_of'][task]}: {cell(swapped['per_task'].get(task))}"]
            for task in data["tasks"]]
    rows.append(["mean (all episodes)", cell(expert["overall"]), cell(entry["tasks"]["overall"]),
                 cell(swapped["overall"])])
    print_table(f"multi-task {model}: {len(data['tasks'])} tasks x {opts.multi_demos} demos, {opts.steps} steps, "
                f"{opts.multi_episodes} episodes per task; train {entry['train_wall_s']:.0f} s",
                ["task", "expert", "policy (own instruction)", "instruction swapped to"], rows)

    def mean(xs: Sequence[int]) -> str:
        return f"{sum(xs) / len(xs):.0f}" if xs else "-"

    rows = [[task, str(p["both"]), str(p["own_only"]), str(p["swapped_only"]), str(p["neither"]),
             mean(p["own_success_lengths"]), mean(p["swapped_success_lengths"])]
            for task, p in entry["paired"].items()]
    print_table("same seeds, own vs swapped instruction (episodes)",
                ["task", "both succeed", "own only", "swapped only", "neither", "own steps", "swapped steps"],
                rows)


def lerobot_train(opts: argparse.Namespace, dataset: Path, vlm: Path, out: Path) -> float:
    """``lerobot-train`` SmolVLA with smolvla_tiny's sizes and the shared settings; returns its wall time."""
    import yaml

    preset = yaml.safe_load((REPO / "packages/embodied-models/src/embodied_models/smolvla/smolvla_tiny.yaml")
                            .read_text())
    model, data = preset["model"], preset["data"]
    horizon, image = int(data["action_horizon"]), int(data["image_size"][0])
    bin_dir = Path(opts.lerobot_python).parent
    cmd = [str(bin_dir / "lerobot-train"), f"--dataset.repo_id=local/{dataset.name}", f"--dataset.root={dataset}",
           "--policy.type=smolvla", f"--policy.vlm_model_name={vlm}", "--policy.load_vlm_weights=false",
           f"--policy.num_vlm_layers={model['num_vlm_layers']}",
           f"--policy.expert_width_multiplier={model['expert_width_multiplier']}",
           f"--policy.self_attn_every_n_layers={model['self_attn_every_n_layers']}",
           f"--policy.max_state_dim={model['max_state_dim']}", f"--policy.max_action_dim={model['max_action_dim']}",
           f"--policy.chunk_size={horizon}", f"--policy.n_action_steps={opts.replan_steps}",
           f"--policy.resize_imgs_with_padding=[{image},{image}]",
           f"--policy.tokenizer_max_length={model['tokenizer_max_length']}",
           f"--policy.num_steps={model['num_inference_steps']}",
           f"--policy.freeze_vision_encoder={str(model['freeze_vision_encoder']).lower()}",
           f"--policy.train_expert_only={str(model['train_expert_only']).lower()}",
           "--policy.push_to_hub=false", "--policy.device=cpu", "--policy.use_amp=false",
           f"--policy.optimizer_lr={opts.lr}",
           f"--policy.optimizer_betas=[{OPTIMIZER['beta1']},{OPTIMIZER['beta2']}]",
           f"--policy.optimizer_eps={OPTIMIZER['eps']}", f"--policy.optimizer_weight_decay={OPTIMIZER['weight_decay']}",
           f"--policy.optimizer_grad_clip_norm={OPTIMIZER['clip']}",
           f"--policy.scheduler_warmup_steps={opts.warmup}", f"--policy.scheduler_decay_steps={opts.steps}",
           f"--policy.scheduler_decay_lr={opts.min_lr}",
           f"--steps={opts.steps}", f"--batch_size={opts.batch_size}", f"--seed={opts.seed}",
           f"--num_workers={opts.num_workers}", f"--save_freq={opts.steps}", "--log_freq=50", "--wandb.enable=false",
           f"--output_dir={out}", *opts.lerobot_train_arg]
    if out.exists():
        import shutil

        shutil.rmtree(out)  # lerobot-train refuses an existing output dir without --resume
    return run(cmd, out.parent / f"{out.name}.train.log", env=_lerobot_env(out.parent))


def _lerobot_env(work: Path) -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(work / "hf_home"), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}


def lerobot_eval(opts: argparse.Namespace, checkpoint: Path, out: Path) -> dict[str, Any]:
    """One ``lerobot-eval`` run (its own MetaworldEnv, 480 x 480 frames) on the first seeds."""
    bin_dir = Path(opts.lerobot_python).parent
    cmd = [str(bin_dir / "lerobot-eval"), f"--policy.path={checkpoint}", "--env.type=metaworld",
           f"--env.task={opts.task}", f"--eval.n_episodes={opts.lerobot_eval_episodes}", "--eval.batch_size=1",
           f"--seed={opts.eval_seed}", "--policy.device=cpu", f"--output_dir={out}"]
    if out.exists():
        import shutil

        shutil.rmtree(out)
    wall = run(cmd, out.parent / f"{out.name}.log", env=_lerobot_env(out.parent))
    info = json.loads((out / "eval_info.json").read_text())
    overall = info["overall"]
    n = int(overall["n_episodes"])
    return {"wall_s": wall, **rate(round(overall["pc_success"] * n / 100), n)}


SHAPING = ("task", "demos", "image_size", "collect_seed", "steps", "batch_size", "lr", "warmup", "min_lr", "seed",
           "num_workers", "train_arg", "episodes", "eval_seed", "replan_steps")
"""Settings that shape the single-task figures of a model."""


def previous_single(opts: argparse.Namespace, report: Mapping[str, Any], model: str) -> dict[str, Any] | None:
    """``model``'s single-task entry in the report file that was in place when this run started (an earlier run)
    when it was measured with every setting of :data:`SHAPING` equal to this run's, else None."""
    previous = opts.previous_report
    if any((previous.get("settings") or {}).get(k) != report["settings"][k] for k in SHAPING):
        return None
    entry = (previous.get("single") or {}).get("models", {}).get(model)
    return entry if entry and "success" in entry else None


def part_lerobot(opts: argparse.Namespace, work: Path, report: dict[str, Any]) -> None:
    lerobot_python = Path(opts.lerobot_python)
    if not lerobot_python.is_file():
        raise SystemExit(f"{lerobot_python} not found: run scripts/setup.sh (it creates .venv-lerobot)")
    data = collect(opts, opts.task, opts.demos, work / "data_single")
    model = "smolvla_tiny"
    vlm = work / "lerobot_vlm"
    run([str(lerobot_python), str(REPO / "benchmarks" / "lerobot_smolvla_vlm.py"), str(vlm)], work / "vlm.log",
        env=_lerobot_env(work))
    run_dir = work / "lerobot_smolvla"
    train_wall = lerobot_train(opts, Path(data["path"]), vlm, run_dir)
    imported = work / "lerobot_smolvla_imported"
    if imported.exists():
        import shutil

        shutil.rmtree(imported)
    run([*EMBODIED, "checkpoint", "import-lerobot-smolvla", str(run_dir), str(imported)], work / "import.log")
    theirs = eval_ours(opts, imported, opts.task, work / "lerobot_smolvla_eval", episodes=opts.episodes)
    train_cpu = cpu_of(run_dir.parent / f"{run_dir.name}.train.log")
    # ours: from the single part (this run, else the report of an earlier run in WORKDIR with the same settings)
    ours = (report.get("single") or {}).get("models", {}).get(model)
    if not ours or "success" not in ours:
        ours = previous_single(opts, report, model)
    if not ours or "success" not in ours:
        out = work / f"single_{model}"
        ours = {"train_wall_s": train_ours(opts, model, Path(data["path"]), out),
                "train_cpu_s": cpu_of(out.parent / f"{out.name}.train.log")}
        ours["success"] = success_of(eval_ours(opts, out, opts.task, work / f"single_{model}_eval",
                                               episodes=opts.episodes))
    entry: dict[str, Any] = {"train_wall_s": train_wall, "train_cpu_s": train_cpu, "success": success_of(theirs),
                             "vlm_folder": str(vlm)}
    rows = [[f"ours ({model})", cell(ours["success"]), f"{ours['train_wall_s']:.0f}", f"{ours['train_cpu_s']:.0f}"],
            ["lerobot-train SmolVLA, our env", cell(entry["success"]), f"{train_wall:.0f}",
             f"{entry['train_cpu_s']:.0f}"]]
    if opts.lerobot_eval_episodes > 0:
        k = opts.lerobot_eval_episodes
        pretrained = run_dir / "checkpoints" / "last" / "pretrained_model"
        entry["lerobot_eval"] = lerobot_eval(opts, pretrained, work / "lerobot_eval")
        ours_480 = eval_ours(opts, imported, opts.task, work / "lerobot_smolvla_eval_render_lerobot", episodes=k,
                             render="lerobot")
        entry["our_env_render_lerobot"] = success_of(ours_480)
        rows += [[f"lerobot-train SmolVLA, lerobot-eval (480 px), {k} ep", cell(entry["lerobot_eval"]), "-", "-"],
                 [f"lerobot-train SmolVLA, our env --render lerobot, {k} ep", cell(entry["our_env_render_lerobot"]),
                  "-", "-"]]
    report["lerobot"] = {"ours": ours, "lerobot": entry, "dataset": data["path"]}
    print_table(f"ours vs lerobot 0.6.1 on {opts.task}: same dataset, SmolVLA at smolvla_tiny's sizes, {opts.steps} "
                f"steps x batch {opts.batch_size}, lr {opts.lr}, seed {opts.seed}; {opts.episodes} episodes",
                ["trained by / evaluated in", "success [95% CI]", "train wall s", "train CPU s"], rows)


# ---------------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="single,multi,lerobot", help="comma-separated: single, multi, lerobot")
    parser.add_argument("--workdir", type=Path, default=REPO / "outputs" / "metaworld_bench")
    parser.add_argument("--json", type=Path, default=None, help="report file (default WORKDIR/metaworld.json)")
    parser.add_argument("--task", default="button-press-topdown-v3")
    parser.add_argument("--demos", type=int, default=50)
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--collect-seed", type=int, default=0)
    parser.add_argument("--models", default="smolvla_tiny,pi05_tiny,xvla_tiny,groot_n1_7_tiny")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--min-lr", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--train-arg", action="append", default=[], help="extra `embodied train` argument "
                        "(repeatable), e.g. --train-arg=model.train_expert_only=false")
    parser.add_argument("--lerobot-train-arg", action="append", default=[], help="extra lerobot-train argument")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--eval-seed", type=int, default=1000, help="episode i uses seed EVAL_SEED + i")
    parser.add_argument("--replan-steps", type=int, default=5)
    # 1: two MetaWorld envs built at once in one process can trip MetaWorld's MT1 goal check (its task sampling
    # reseeds numpy's global RNG), so episodes run one after the other by default.
    parser.add_argument("--num-envs", type=int, default=1)
    parser.add_argument("--baselines", default="hold,mean_action")
    parser.add_argument("--baseline-episodes", type=int, default=20, help="episodes per baseline (first seeds)")
    parser.add_argument("--multi-tasks", default=EASY5)
    parser.add_argument("--multi-demos", type=int, default=25)
    parser.add_argument("--multi-episodes", type=int, default=20, help="episodes per task")
    parser.add_argument("--lerobot-python", default=str(DEFAULT_LEROBOT_PYTHON))
    parser.add_argument("--lerobot-eval-episodes", type=int, default=10, help="0: no lerobot-eval cross-check")
    parser.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads of every command (both "
                        "frameworks; 0: the libraries' default). On a loaded machine two threads per process spin "
                        "against each other: measured 0.4-2.9 CPU s per SmolVLA-tiny step with 2 threads, 0.06 with 1")
    opts = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress lines reach a redirected log as they happen
    if opts.threads > 0:  # inherited by every command, and this process's own episodes
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[name] = str(opts.threads)
    opts.models = [m for m in opts.models.split(",") if m]
    parts = [p for p in opts.parts.split(",") if p]
    unknown = sorted(set(parts) - {"single", "multi", "lerobot"})
    if unknown or not opts.models:
        parser.error(f"--parts: unknown {unknown} (single, multi, lerobot)" if unknown else "--models is empty")
    work = opts.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
                              "optimizer": OPTIMIZER, "machine": {"cpus": os.cpu_count()}}
    path = opts.json or work / "metaworld.json"
    opts.report_path = path
    # read once, before this run overwrites it: earlier single-task entries and multi-task stages are reused
    opts.previous_report = json.loads(path.read_text()) if path.is_file() else {}
    opts.started = time.perf_counter()
    for part in parts:
        {"single": part_single, "multi": part_multi, "lerobot": part_lerobot}[part](opts, work, report)
        save_report(opts, report)
    print(f"\nwrote {path} ({report['wall_s']:.0f} s wall, {report['cpu_s']:.0f} s CPU in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
