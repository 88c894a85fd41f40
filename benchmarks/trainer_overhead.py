"""Steps/s of the ``Trainer`` next to a minimal hand-written PyTorch loop, in the same process.

Both train ``tiny_flow_policy`` (same initialization) on the same ``dummy_datasets`` samples with the model's
transforms and collate, AdamW with the same hyperparameters, the same LR schedule, clipping at 1.0, float32,
no DataLoader workers. The Trainer runs as a user would run it (metrics.jsonl, console logging every
``--log-interval`` steps, stage timings every 20, NaN/spike guards, resumable loader) but saves no
checkpoint. Runs alternate (hand, trainer, hand, ...) and the median of each is reported, so load from
other processes hits both alike. The first ``--warmup`` steps of every run are not timed. Ratios are printed
by wall clock and by CPU time of this process (the steadier figure when other jobs share the machine).

``--interleaved`` instead alternates 25-step chunks of the Trainer's loop body and of the hand loop on the
same model and optimizer, which cancels drifting load from other processes; add ``--plain-data`` to feed the
Trainer the hand loop's plain DataLoader, which separates the loop's cost from the resumable loader's
(per-sample seeding of the global RNGs, so augmentations do not depend on the worker count and resume exactly).

Goal: trainer >= 0.98x the hand loop (issue 29).

    .venv/bin/python benchmarks/trainer_overhead.py [--steps 300] [--repeats 3] [--batch-size 8] [--interleaved]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from embodied_core import hookimpl, registry
from embodied_core.config.resolve import load_config, model_spec
from embodied_core.registry import groups
from embodied_core.trainer.api import Trainer
from embodied_core.trainer.components import build_transforms

MODEL = "tiny_flow_policy"
GOAL = 0.98


def _config(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    return {"model_name": MODEL, "dataset_format": "dummy_datasets", "dtype": "float32",
            "num_workers": args.num_workers,
            "num_samples": 4096, "per_device_batch_size": args.batch_size, "train_iters": args.steps,
            "lr_base": 1e-4, "lr_warmup_iters": 10, "save_interval": 0, "log_interval": args.log_interval,
            "seed": 7, "output_dir": str(out)}


class StepClock:
    """Hook that timestamps the end of every step."""

    def __init__(self) -> None:
        self.times: list[tuple[float, float]] = []

    @hookimpl
    def on_step_end(self, step: int, metrics: dict[str, float] | None) -> None:
        self.times.append(_now())


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _rates(times: list[tuple[float, float]], warmup: int) -> tuple[float, float]:
    """(steps per wall second, steps per CPU second) after ``warmup`` steps."""
    timed = times[warmup:]
    steps = len(timed) - 1
    return steps / (timed[-1][0] - timed[0][0]), steps / (timed[-1][1] - timed[0][1])


def trainer_steps_per_s(args: argparse.Namespace) -> tuple[float, float]:
    """Steps per wall and per CPU second of ``Trainer.train()`` after the warmup steps."""
    with tempfile.TemporaryDirectory() as tmp:
        clock = StepClock()
        Trainer({"training": _config(args, Path(tmp))}, plugins=[clock]).train()
    return _rates(clock.times, args.warmup)


def hand_loop_steps_per_s(args: argparse.Namespace) -> tuple[float, float]:
    """Steps per wall and per CPU second of the minimal loop: next batch, forward, backward, clip, step,
    schedule, zero_grad."""
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(training=_config(args, Path(tmp)))
    training, spec = config.training, model_spec(MODEL)
    torch.manual_seed(training.seed)
    model = spec.load_factory()(config.model, config.data)
    dataset = registry.load_factory(groups.DATASET_FORMATS, "dummy_datasets")(training, config.data)
    transforms, _ = build_transforms(config, spec, dataset)

    class Transformed(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(dataset)

        def __getitem__(self, index: int) -> Any:
            sample = dataset[index]
            return transforms.sample_transform(sample) if transforms.sample_transform else sample

    loader = DataLoader(Transformed(), batch_size=training.per_device_batch_size, shuffle=True, drop_last=True,
                        collate_fn=transforms.collate_fn, num_workers=training.num_workers,
                        persistent_workers=training.num_workers > 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=training.lr_base, weight_decay=training.weight_decay,
                                  betas=(training.adam_beta1, training.adam_beta2), eps=training.adam_eps)
    lr_fn = registry.load_factory(groups.LR_SCHEDULERS, training.lr_decay_style)(training)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_fn(s, training.lr_base) / training.lr_base)
    batches = iter(loader)
    times = []
    model.train()
    for _ in range(args.steps):
        try:
            batch = next(batches)
        except StopIteration:
            batches = iter(loader)
            batch = next(batches)
        loss = model(batch.to("cpu")).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), training.clip_grad, foreach=True)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(_now())
    return _rates(times, args.warmup)


def interleaved_ms_per_step(args: argparse.Namespace) -> tuple[list[float], list[float]]:
    """CPU ms per step of the Trainer's loop body and of the hand loop in each round: chunks of 25 steps of
    each, on one model and optimizer in one process (the arm that goes first alternates from round to round),
    so load from other processes and the order cannot favour either side. Returns ``(trainer, hand)`` lists."""
    from torch.utils.data import DataLoader

    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer({"training": {**_config(args, Path(tmp)), "train_iters": 10**9}}).build()
        trainer.setup()
        try:
            def plain_batches() -> Any:
                """Endless batches of a plain DataLoader: a new epoch (reshuffled) whenever one ends."""
                loader = DataLoader(trainer.loader._dataset.dataset, batch_size=args.batch_size, shuffle=True,
                                    drop_last=True, collate_fn=trainer.loader.collate_fn)
                while True:
                    yield from loader

            # --plain-data feeds the Trainer the hand loop's DataLoader: what remains is the loop's own cost.
            data_iter = plain_batches() if args.plain_data else iter(trainer.loader)
            hand_batches = plain_batches()
            model, optimizer, scheduler = trainer.model, trainer.optimizer, trainer.scheduler
            trainer.model.train()

            def trainer_step() -> None:  # the body of BaseTrainer.train()'s loop itself
                trainer.run_step(data_iter)

            def hand_step() -> None:
                model(next(hand_batches).to(trainer.device)).loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)

            per_round: dict[Any, list[float]] = {trainer_step: [], hand_step: []}
            rounds = max(args.steps // 25, 2)
            for round_ in range(rounds + 1):
                for fn in (hand_step, trainer_step) if round_ % 2 else (trainer_step, hand_step):
                    started = time.process_time()
                    for _ in range(25):
                        fn()
                    if round_:  # the first round warms up both
                        per_round[fn].append((time.process_time() - started) / 25 * 1e3)
        finally:
            trainer.close()
    return per_round[trainer_step], per_round[hand_step]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader workers of both loops")
    parser.add_argument("--interleaved", action="store_true",
                        help="alternate 25-step chunks of both loops on one model in one process (steadiest figure)")
    parser.add_argument("--plain-data", action="store_true",
                        help="with --interleaved: feed the Trainer a plain DataLoader instead of its resumable one")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1 keeps timings stable on a shared machine)")
    parser.add_argument("--keep-denormals", dest="flush_denormal", action="store_false",
                        help="do not flush denormal floats to zero. By default both loops flush them: otherwise "
                             "whichever run happens to drift into denormal weights/gradients runs up to 30%% "
                             "slower on CPU, which measures numerical luck rather than the trainer")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.flush_denormal:
        torch.set_flush_denormal(True)
    if args.interleaved:
        if args.num_workers == 0 and hasattr(os, "sched_setaffinity"):
            # one core for the whole comparison: moving between cores (and their caches) mid-chunk was the
            # largest noise between the two arms on a shared VM
            os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
        trainer_ms, hand_ms = interleaved_ms_per_step(args)
        ratios = [h / t for h, t in zip(hand_ms, trainer_ms, strict=True)]
        data = "plain DataLoader" if args.plain_data else "resumable loader"
        print(f"interleaved ({data} in the Trainer), {len(ratios)} rounds of 25 steps, CPU time per step: "
              f"hand loop {sum(hand_ms) / len(hand_ms):.3f} ms, Trainer loop body "
              f"{sum(trainer_ms) / len(trainer_ms):.3f} ms; ratio (hand / Trainer) "
              f"{sum(hand_ms) / sum(trainer_ms):.3f}x, "
              f"per round median {statistics.median(ratios):.3f}x [{min(ratios):.3f}-{max(ratios):.3f}] "
              f"(goal >= {GOAL}x)")
        return
    hand, trainer = [], []
    for repeat in range(args.repeats):
        hand.append(hand_loop_steps_per_s(args))
        trainer.append(trainer_steps_per_s(args))
        print(f"repeat {repeat + 1}: hand loop {hand[-1][0]:.2f} steps/s ({hand[-1][1]:.2f} per CPU s), "
              f"Trainer {trainer[-1][0]:.2f} steps/s ({trainer[-1][1]:.2f} per CPU s)")
    for i, label in ((0, "wall clock"), (1, "CPU time")):
        h, t = statistics.median(r[i] for r in hand), statistics.median(r[i] for r in trainer)
        print(f"median by {label}: hand loop {h:.2f} steps/s, Trainer {t:.2f} steps/s, ratio {t / h:.3f}x "
              f"(goal >= {GOAL}x)")


if __name__ == "__main__":
    main()
