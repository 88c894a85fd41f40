"""``embodied data``: inspect, synthesize and summarize datasets (entry point group ``embodied.commands``).

```
embodied data inspect PATH [--deep] [--json] version, episodes, features, codecs in the files, problems
embodied data synth OUTPUT [--episodes N ...] a small LeRobot v3.0 dataset of a visual reaching task
embodied data stats PATH [--episodes ...]    per-feature stats and where they come from
embodied data preview PATH --image-augmentation PRESET|FILE.yaml [--samples 8 --out grid.png]  original vs augmented
embodied data mixture FILE.yaml [--model-name NAME model.x=1 ...]  a dataset mixture's entries, measured shares,
                                             stats, problems
embodied data collect --env ENV --out DIR ...  an env's scripted expert as a dataset (embodied-eval's data-collect)
```
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from embodied_core.cli.arguments import index_list
from embodied_core.errors import UsageError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from embodied_core import registry
    from embodied_core.registry.groups import COMMANDS
    from embodied_data.cli.inspect_video import DEEP_FRAMES_PER_EPISODE

    extra = sorted(name[len("data-"):] for name in registry.names(COMMANDS) if name.startswith("data-"))
    epilog = f"sub-commands from other packages: {', '.join(extra)}" if extra else None
    parser = argparse.ArgumentParser(prog="embodied data", description="Dataset tools.", epilog=epilog)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{inspect,synth,stats,preview,mixture}")

    inspect = sub.add_parser("inspect", help="describe a LeRobot dataset and list its problems (exit 1 if any)")
    inspect.add_argument("path", help="dataset root (the folder holding meta/info.json)")
    inspect.add_argument("--deep", action="store_true",
                         help=f"decode {DEEP_FRAMES_PER_EPISODE} frames spread over every episode and camera, not only "
                              "the last one (slower; what CI should run)")
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")

    synth = sub.add_parser("synth", help="write a small LeRobot v3.0 dataset of a visual reaching task")
    synth.add_argument("output", help="folder to create (must be empty or absent)")
    synth.add_argument("--episodes", type=int, default=20, help="number of episodes (default 20)")
    synth.add_argument("--fps", type=int, default=10, help="frames per second (default 10)")
    synth.add_argument("--min-length", type=int, default=40, help="shortest episode in frames (default 40)")
    synth.add_argument("--max-length", type=int, default=60, help="longest episode in frames (default 60)")
    synth.add_argument("--image-size", type=int, nargs=2, default=(96, 96), metavar=("H", "W"),
                       help="frame height and width, even (default 96 96)")
    synth.add_argument("--cameras", nargs="+", default=["front"], choices=["front", "wrist"],
                       help="camera views: front (whole workspace), wrist (zoom on the arm)")
    synth.add_argument("--num-tasks", type=int, default=1, choices=[1, 2],
                       help="1: reach the red target; 2: red or green, named by the task text")
    synth.add_argument("--episodes-per-file", type=int, default=None,
                       help="episodes per data/video file (default: all in one)")
    synth.add_argument("--codec", choices=["h264", "mpeg4"], default=None,
                       help="video codec (default: h264 when the installed libav can encode it, else mpeg4)")
    synth.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    synth.add_argument("--overwrite", action="store_true", help="replace an existing dataset at OUTPUT")

    stats = sub.add_parser("stats", help="per-feature stats of a LeRobot dataset (read, or computed when absent)")
    stats.add_argument("path", help="dataset root")
    stats.add_argument("--episodes", type=index_list, default=None, help="episode subset, e.g. 0-9,12")
    stats.add_argument("--json", action="store_true", help="print the stats as JSON")

    preview = sub.add_parser("preview", help="a PNG grid of original vs augmented frames (data.image_augmentation)")
    preview.add_argument("path", help="dataset root")
    preview.add_argument("--image-augmentation", required=True, metavar="PRESET|FILE.yaml",
                         help="a preset (lerobot, openpi, groot, cosmos3, dreamzero) or a YAML file with a "
                              "data.image_augmentation section")
    preview.add_argument("--samples", type=int, default=8, help="rows: samples evenly spaced over the dataset (8)")
    preview.add_argument("--out", default="augmentation_preview.png", help="PNG to write")
    preview.add_argument("--seed", type=int, default=3047, help="the run's --seed whose draws to show (3047)")
    preview.add_argument("--epoch", type=int, default=0, help="the epoch whose draws to show (0)")
    preview.add_argument("--cameras", nargs="+", default=None, help="cameras to show (default: all)")
    preview.add_argument("--episodes", type=index_list, default=None, help="episode subset, e.g. 0-9,12")
    preview.add_argument("--video-backend", default="torchcodec", help="frame decoder (default torchcodec)")

    mixture = sub.add_parser("mixture", help="a dataset mixture's entries, sampling shares measured over one epoch, "
                                             "stats and every problem (exit 1 if any)")
    mixture.add_argument("file", help="the mixture YAML (what --dataset-mixture reads)")
    mixture.add_argument("--model-name", default=None,
                         help="also map every entry into this model's input as embodied train would (its data checks, "
                              "its transform on one sample per entry, all entries collated together); model.x=1 / "
                              "data.y=2 items override its sections")
    mixture.add_argument("--config-file", default=None,
                         help="the run's YAML (model: / data: sections) for --model-name")
    for flag, help_text in (("--dataset-format", "reader of the entries that set none (default lerobot_datasets)"),
                            ("--video-backend", "decoder of the entries that set none (default torchcodec)"),
                            ("--dataset-strategy", "strategy of the entries that set none (default default)"),
                            ("--data-root-dir", "folder relative entry paths are resolved against")):
        mixture.add_argument(flag, default=None, help=help_text)
    mixture.add_argument("--seed", type=int, default=None, help="the run's --seed (the schedule's default seed)")
    mixture.add_argument("--per-device-batch-size", type=int, default=None,
                         help="the run's batch (the epoch is rounded to whole batches)")
    mixture.add_argument("--streaming", action="store_true", help="measure the --streaming order")
    mixture.add_argument("--epoch", type=int, default=0, help="the epoch whose draws are measured (0)")
    mixture.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def _run_inspect(args: argparse.Namespace) -> int:
    from embodied_data.cli.inspect import inspect_dataset, render_report

    report = inspect_dataset(args.path, deep=args.deep)
    if args.json:
        print(json.dumps({"path": report.path, "ok": report.ok, **report.facts, "problems": report.problems,
                          "notes": report.notes}, indent=2))
    else:
        print(render_report(report))
    return 0 if report.ok else 1


def _run_synth(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_data.synth import SynthConfig, write_synthetic_dataset

    config = SynthConfig(num_episodes=args.episodes, fps=args.fps, min_length=args.min_length,
                         max_length=args.max_length, image_size=tuple(args.image_size), cameras=tuple(args.cameras),
                         num_tasks=args.num_tasks, episodes_per_file=args.episodes_per_file, codec=args.codec,
                         seed=args.seed)
    summary = write_synthetic_dataset(Path(args.output), config, overwrite=args.overwrite)
    print(f"wrote {summary.root}: LeRobot v3.0, {summary.num_episodes} episodes, {summary.num_frames} frames at "
          f"{args.fps} fps, cameras {', '.join(summary.cameras)} ({summary.codec}); state/action: 2-D arm position")
    print(f"check it:  embodied data inspect {summary.root}")
    return 0


def _run_stats(args: argparse.Namespace) -> int:
    from embodied_data.stats import dataset_stats, stats_to_json

    result = dataset_stats(args.path, episodes=args.episodes)
    if args.json:
        print(json.dumps({"stats": stats_to_json(result.stats), "sources": result.sources}, indent=2))
        return 0
    for key, stats in result.stats.items():
        print(f"{key}  ({result.sources[key]})")
        for name in ("count", "mean", "std", "min", "max", "q01", "q99"):
            if name in stats:
                values = stats[name].ravel()
                shown = ", ".join(f"{v:.6g}" for v in values[:8]) + (", ..." if values.size > 8 else "")
                print(f"  {name:<5} [{shown}]")
    return 0


def _run_preview(args: argparse.Namespace) -> int:
    from pathlib import Path

    from embodied_data.cli.preview import augmentation_section, preview

    if args.samples < 1:
        raise UsageError(f"--samples {args.samples}: must be >= 1")
    out = Path(args.out)
    lines = preview(args.path, section=augmentation_section(args.image_augmentation), samples=args.samples, out=out,
                    seed=args.seed, epoch=args.epoch, cameras=args.cameras, episodes=args.episodes,
                    video_backend=args.video_backend)
    print("\n".join(lines))
    print(f"wrote {out}: {len(lines)} samples, original | augmented per camera")
    return 0


def _run_mixture(args: argparse.Namespace, overrides: Sequence[str] = ()) -> int:
    from embodied_data.mixture import mixture_report, render_mixture_report, report_json

    flags = {"dataset_format": args.dataset_format, "video_backend": args.video_backend,
             "dataset_strategy": args.dataset_strategy, "data_root_dir": args.data_root_dir, "seed": args.seed,
             "per_device_batch_size": args.per_device_batch_size, "streaming": args.streaming or None}
    if overrides and args.model_name is None:
        raise UsageError(f"{' '.join(overrides)}: overrides of the model's sections need --model-name")
    report = mixture_report(args.file, model=args.model_name, config_file=args.config_file, flags=flags,
                            epoch=args.epoch, overrides=overrides)
    print(json.dumps(report_json(report), indent=2) if args.json else render_mixture_report(report))
    return 0 if report.ok else 1


def main(argv: Sequence[str]) -> int:
    """Runs ``embodied data`` with ``argv`` (the arguments after ``data``); returns the exit code."""
    from embodied_core import registry
    from embodied_core.registry.groups import COMMANDS

    # Sub-commands contributed by other packages: ``embodied data X`` runs the embodied.commands entry ``data-X``
    # (e.g. ``data-precompute-latents`` of embodied-models' lingbot_va), so embodied-data never imports them.
    if argv and not argv[0].startswith("-") and f"data-{argv[0]}" in registry.names(COMMANDS):
        return registry.load_factory(COMMANDS, f"data-{argv[0]}")(list(argv[1:]))
    if argv and argv[0] == "mixture":  # model.x=1 / data.y=2 items anywhere after it, as embodied train takes them
        from embodied_core.config.layers import is_dotlist_item

        overrides = [token for token in argv[1:] if is_dotlist_item(token)]
        return _run_mixture(_parser().parse_args([t for t in argv if not is_dotlist_item(t)]), overrides)
    args = _parser().parse_args(list(argv))
    runners = {"inspect": _run_inspect, "synth": _run_synth, "stats": _run_stats, "preview": _run_preview,
               "mixture": _run_mixture}
    if args.command not in runners:
        raise UsageError(f"unknown sub-command {args.command!r}")
    return runners[args.command](args)
