"""``embodied eval``: closed-loop rollouts in an env plugin, or open-loop error on a dataset (``--help``: no torch)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from embodied_core.cli.arguments import index_list
from embodied_eval.env_options import add_option_flags, flag_values, options_class, scan_env

__all__ = ["build_parser", "main"]


def _env_option(text: str) -> tuple[str, Any]:
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. num_tasks=2")
    return key.strip(), yaml.safe_load(value)


def build_parser(env: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``embodied eval``; with ``env``, plus the option flags that env plugin declares."""
    parser = argparse.ArgumentParser(
        prog="embodied eval",
        description="Evaluate a checkpoint: closed-loop episodes in a simulator (--env), through a running "
                    "`embodied serve` (--server), or open-loop on a LeRobot dataset (--offline).",
        epilog="examples:\n"
               "  embodied eval outputs/main_job --env synth_reach --episodes 50 --baselines hold,mean_action\n"
               "  embodied eval --server ws://127.0.0.1:8000 --env synth_reach --episodes 20\n"
               "  embodied eval outputs/main_job --offline outputs/synth_reach --offline-episodes 20-23\n"
               "  embodied eval outputs/mw --env metaworld --suite easy --episodes 10 --seed 1000\n"
               "environments: `embodied plugins --group envs`; an env's own flags: --env NAME --help",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", nargs="?", default=None,
                        help="checkpoint folder, run output dir or exported policy folder (omit with --server)")
    parser.add_argument("--env", default=None, help="env plugin: synth_reach, pusht, aloha_insertion, "
                                                    "aloha_transfer_cube, ...")
    parser.add_argument("--episodes", type=int, default=50, help="episodes to run (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="episode i uses env seed SEED+i (default 0)")
    parser.add_argument("--num-envs", type=int, default=1,
                        help="environments run in parallel threads, each with its own policy (default 1)")
    parser.add_argument("--max-steps", type=int, default=None, help="steps per episode (default: the env's)")
    parser.add_argument("--replan-steps", type=int, default=None,
                        help="actions executed from each predicted chunk (default: the whole chunk)")
    parser.add_argument("--temporal-ensemble", type=float, default=None, metavar="DECAY",
                        help="average overlapping chunks with weights exp(-DECAY*i), oldest first (ACT: 0.01; "
                             "use with --replan-steps 1)")
    parser.add_argument("--baselines", default="", metavar="NAMES",
                        help="also measure baselines on the same seeds: hold, mean_action (comma-separated)")
    parser.add_argument("--video", action="store_true", help="write videos/episode_NNN.mp4 and videos/grid.mp4")
    parser.add_argument("--output-dir", default="outputs/eval", help="where eval.json goes (default outputs/eval)")
    parser.add_argument("--env-option", type=_env_option, action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the env plugin, e.g. num_tasks=2 for synth_reach (repeatable)")
    parser.add_argument("--server", default=None, metavar="URL",
                        help="evaluate the policy a running `embodied serve` serves (ws://host:port)")
    parser.add_argument("--api-key", default=None, help="the server's API key (with --server)")
    parser.add_argument("--device", default="cpu", help="inference device in process (default cpu)")
    parser.add_argument("--policy-seed", type=int, default=0, help="seed of the policy's noise (default 0)")
    parser.add_argument("--allow-external-references", action="store_true",
                        help="read files the checkpoint's policy folder references outside itself (../ or absolute "
                             "paths, symbolic links, a LoRA base, a large tokenizer); refused by default")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    offline = parser.add_argument_group("open-loop evaluation")
    offline.add_argument("--offline", default=None, metavar="DATASET",
                         help="a LeRobot dataset: action MSE/L1 per horizon step and dimension on its episodes")
    offline.add_argument("--offline-episodes", type=index_list, default=None, metavar="LIST",
                         help="episodes to evaluate, e.g. 20-23 (default: the last 20%%)")
    offline.add_argument("--offline-stride", type=int, default=1, help="evaluate every N-th frame (default 1)")
    options = options_class(env)
    if options is not None:
        add_option_flags(parser, options, env=str(env))
    return parser


def _run_offline(args: argparse.Namespace) -> int:
    from embodied_core.errors import UsageError
    from embodied_eval.offline import offline_eval

    if args.checkpoint is None:
        raise UsageError("--offline needs CHECKPOINT (a local checkpoint folder)")
    if args.env is not None or args.server is not None:
        raise UsageError("--offline evaluates on a dataset; drop --env/--server")
    doc = offline_eval(args.checkpoint, args.offline, output_dir=args.output_dir, episodes=args.offline_episodes,
                       stride=args.offline_stride, device=args.device, seed=args.policy_seed,
                       allow_external_references=args.allow_external_references)
    data = doc["dataset"]
    print(f"open-loop on {data['root']} episodes {data['episodes']} ({data['frames_evaluated']} frames): "
          f"action MSE {doc['mse']:.4g}, L1 {doc['l1']:.4g} (dataset units)")
    steps = doc["mse_per_step"]
    print(f"MSE per horizon step: first {steps[0]:.4g}, last {steps[-1]:.4g}; per dim: "
          + ", ".join(f"{k} {v:.4g}" for k, v in doc["mse_per_dim"].items()))
    print(f"wrote {args.output_dir}/offline_eval.json and offline_eval.png")
    return 0


def main(argv: Sequence[str]) -> int:
    """Runs ``embodied eval`` with ``argv`` (the arguments after ``eval``); returns the exit code."""
    from embodied_core.errors import UsageError

    args = build_parser(scan_env(argv)).parse_args(list(argv))
    if args.offline is not None:
        return _run_offline(args)
    if args.env is None:
        raise UsageError("--env NAME is required (or --offline DATASET); see `embodied plugins --group envs`")
    if (args.checkpoint is None) == (args.server is None):
        raise UsageError("give CHECKPOINT or --server URL (one of them)")
    if args.api_key is not None and args.server is None:
        raise UsageError("--api-key goes with --server")

    from pathlib import Path

    from embodied_eval.closed_loop import evaluate
    from embodied_eval.rollout import RolloutSettings

    output_dir = Path(args.output_dir)
    settings = RolloutSettings(num_episodes=args.episodes, seed=args.seed, num_envs=args.num_envs,
                               max_steps=args.max_steps, replan_steps=args.replan_steps,
                               ensemble_decay=args.temporal_ensemble,
                               video_dir=output_dir / "videos" if args.video else None)
    baselines = tuple(b.strip() for b in args.baselines.split(",") if b.strip())
    report = evaluate(args.checkpoint, env=args.env, settings=settings, output_dir=output_dir, server=args.server,
                      api_key=args.api_key, device=args.device, policy_seed=args.policy_seed, baselines=baselines,
                      env_options=dict(args.env_option), env_flags=flag_values(args),
                      show_progress=not args.no_progress, allow_external_references=args.allow_external_references)
    print(report.table)
    print(f"wrote {report.path}" + (" and baselines/*/eval.json" if baselines else "")
          + (f"; videos in {output_dir / 'videos'}" if args.video else ""))
    return 0
