"""``embodied data collect``: an env plugin's scripted expert recorded as a LeRobot v3.0 dataset (``--help``: no
simulator, no torch)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from embodied_eval.env_options import add_option_flags, flag_values, options_class, scan_env

__all__ = ["build_parser", "main"]


def build_parser(env: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``embodied data collect``; with ``env``, plus that env plugin's option flags."""
    from embodied_eval.cli.eval import _env_option

    parser = argparse.ArgumentParser(
        prog="embodied data collect",
        description="Run an env plugin's scripted expert and record its successful episodes as a LeRobot v3.0 "
                    "dataset with video (resumable: the same command again continues where it stopped).",
        epilog="examples:\n"
               "  embodied data collect --env metaworld --task button-press-topdown-v3 --episodes 50 "
               "--out outputs/mw_bpt\n"
               "  embodied data collect --env metaworld --task reach-v3,drawer-open-v3 --episodes 25 "
               "--image-size 96 --out outputs/mw_two\n"
               "  embodied data collect --env synth_reach --episodes 20 --out outputs/synth_expert\n"
               "envs with an expert: metaworld, synth_reach; an env's own flags: --env NAME --help",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True, help="env plugin with a scripted expert: metaworld, synth_reach")
    parser.add_argument("--out", required=True, help="dataset folder (new, or one this command wrote: continued)")
    parser.add_argument("--episodes", type=int, default=50, help="episodes per task (default 50)")
    parser.add_argument("--policy", default="expert", help="who acts: expert (the env's scripted expert; default)")
    parser.add_argument("--seed", type=int, default=0,
                        help="attempt k of a task runs from seed SEED+k (default 0; evaluate on other seeds)")
    parser.add_argument("--keep-failures", action="store_true",
                        help="also record episodes the expert failed (default: re-seeded and dropped)")
    parser.add_argument("--max-steps", type=int, default=None, help="episode length cap (default: the env's)")
    parser.add_argument("--env-option", type=_env_option, action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the env plugin (repeatable), e.g. num_tasks=2 for synth_reach")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    options = options_class(env)
    if options is not None:
        add_option_flags(parser, options, env=str(env))
    return parser


def main(argv: Sequence[str]) -> int:
    """Runs ``embodied data collect`` with ``argv``; returns the exit code."""
    args = build_parser(scan_env(argv)).parse_args(list(argv))
    from embodied_eval.collect import CollectSettings, collect_dataset

    settings = CollectSettings(num_episodes=args.episodes, seed=args.seed, keep_failures=args.keep_failures,
                               max_steps=args.max_steps, policy=args.policy)
    summary = collect_dataset(args.env, args.out, settings, env_flags=flag_values(args),
                              env_options=dict(args.env_option), show_progress=not args.no_progress)
    rate = (summary.attempts - summary.failures) / max(summary.attempts, 1)
    print(f"wrote {summary.root}: LeRobot v3.0, {summary.num_episodes} episodes ({summary.new_episodes} new), "
          f"{summary.num_frames} frames at {summary.fps} fps, {len(summary.tasks)} task(s), in {summary.wall_s:.1f} s")
    print(f"expert: {summary.attempts - summary.failures}/{summary.attempts} attempts succeeded ({rate:.1%}); "
          f"failed seeds are listed in {summary.root}/meta/collect.json")
    print(f"check it:  embodied data inspect {summary.root} --deep")
    return 0
