"""What a checkpoint records about the LR schedule, and the warning when a resumed run changes it implicitly.

``--lr-decay-iters`` defaults to ``--train-iters``: resuming with another ``--train-iters`` and no
``--lr-decay-iters`` stretches or shrinks the schedule from the resumed step on, so the learning rate jumps
from the old curve to the new one. Each checkpoint records the lengths it was trained with
(:func:`schedule_record`); :func:`schedule_change_warning` compares them with the resumed run's flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from embodied_core.config.training_args import TrainingArgs

__all__ = ["SCHEDULE_KEY", "schedule_change_warning", "schedule_record"]

SCHEDULE_KEY = "schedule"
"""Key of :func:`schedule_record` in a checkpoint's shared trainer state (``trainer_state.json``)."""


def schedule_record(args: TrainingArgs) -> dict[str, int | None]:
    """The schedule lengths of this run, as a checkpoint records them."""
    return {"train_iters": args.train_iters, "lr_decay_iters": args.lr_decay_iters,
            "lr_warmup_iters": args.lr_warmup_iters}


def _length(record: Mapping[str, Any]) -> int:
    decay = record.get("lr_decay_iters")
    return int(decay if decay is not None else record["train_iters"])


def schedule_change_warning(saved: Mapping[str, Any] | None, args: TrainingArgs, *, step: int,
                            path: str) -> str | None:
    """The warning for a resume that changes the decay length only because ``--train-iters`` changed.

    None when the checkpoint records no schedule (saved before schedules were recorded), when the length is
    unchanged, or when ``--lr-decay-iters`` is set (an explicit choice).
    """
    if not saved or "train_iters" not in saved or args.lr_decay_iters is not None:
        return None
    old, new = _length(saved), _length(schedule_record(args))
    if old == new:
        return None
    origin = (f"--lr-decay-iters {saved['lr_decay_iters']}" if saved.get("lr_decay_iters") is not None
              else f"--train-iters {saved['train_iters']}, --lr-decay-iters unset")
    return (f"resuming {path} at step {step}: the LR schedule was {old} steps long ({origin}) and is now {new} "
            f"(--train-iters {args.train_iters}, --lr-decay-iters unset, so it follows --train-iters); the "
            f"learning rate changes course from step {step} on. To keep the old schedule, pass "
            f"--lr-decay-iters {old}.")
