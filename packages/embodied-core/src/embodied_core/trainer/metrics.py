"""Per-step measurements and their reduction into the logged metrics dict.

During a step everything stays on the device; :func:`reduce_step_metrics` runs on logging steps only and
moves all device values to the host in one transfer (one collective under a distributed strategy).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from embodied_core.config.training_args import TrainingArgs
from embodied_core.distributed.base import DistributedStrategy

__all__ = ["STAGES", "StageTimer", "StepRecord", "lrs_by_group", "reduce_step_metrics"]

STAGES = ("data", "forward_backward", "optimizer")
"""Stages timed on ``--detail-log-interval`` steps."""


class StageTimer:
    """Wall time per stage of one step.

    On detail steps (``sync=True``) the device is synchronized at every stage boundary so the times are
    the device's, not the launch queue's; on other steps nothing is synchronized and only the total
    step time is meaningful.
    """

    def __init__(self, device: torch.device, *, sync: bool) -> None:
        self.sync = sync and device.type == "cuda"
        self.totals = dict.fromkeys(STAGES, 0.0)
        self._stage: str | None = None
        self._since = time.perf_counter()
        self.started = self._since

    def start(self, stage: str) -> None:
        """Ends the running stage and starts ``stage``."""
        self.stop()
        self._stage = stage

    def stop(self) -> None:
        """Ends the running stage."""
        if self.sync:
            torch.cuda.synchronize()
        now = time.perf_counter()
        if self._stage is not None:
            self.totals[self._stage] += now - self._since
        self._stage, self._since = None, now

    def elapsed(self) -> float:
        """Seconds since the timer was created."""
        return time.perf_counter() - self.started


class StepRecord:
    """What one update leaves for logging: host numbers, plus the model's metrics still on the device."""

    __slots__ = ("applied", "good", "grad_norm", "loss_sum", "lrs", "model_metrics", "step_time_s", "timings")

    def __init__(self, *, loss_sum: float, good: int, grad_norm: float, applied: bool, lrs: dict[str, float],
                 step_time_s: float, timings: dict[str, float] | None,
                 model_metrics: dict[str, list[torch.Tensor]]) -> None:
        self.loss_sum = loss_sum  # sum of the micro-batch losses that counted
        self.good = good  # how many counted
        self.grad_norm = grad_norm
        self.applied = applied
        self.lrs = lrs
        self.step_time_s = step_time_s
        self.timings = timings
        self.model_metrics = model_metrics  # one tensor per micro-batch


def _rank_losses(record: StepRecord, strategy: DistributedStrategy, ranks: list[int]) -> dict[str, float]:
    local = torch.tensor([record.loss_sum, float(record.good)], dtype=torch.float64, device=strategy.device)
    gathered = strategy.all_gather_scalars(local)
    values = gathered.tolist()
    out = {}
    for rank in ranks:
        loss_sum, good = values[rank]
        out[f"loss/rank{rank}"] = loss_sum / good if good > 0 else math.nan
    return out


def _timings(record: StepRecord, strategy: DistributedStrategy, level: int) -> dict[str, float]:
    assert record.timings is not None
    local = torch.tensor([record.timings[s] for s in STAGES], dtype=torch.float64, device=strategy.device)
    per_rank = strategy.all_gather_scalars(local).tolist()
    out = {}
    # The slowest rank sets the pace of a synchronous step, so level 0 reports the maximum over ranks.
    for i, stage in enumerate(STAGES):
        out[f"time/{stage}_s"] = max(row[i] for row in per_rank)
        if level >= 1:
            for rank, row in enumerate(per_rank):
                out[f"time/{stage}_s/rank{rank}"] = row[i]
    return out


def reduce_step_metrics(record: StepRecord, *, args: TrainingArgs, strategy: DistributedStrategy,
                        counters: dict[str, float]) -> dict[str, float]:
    """The metrics dict of a logging step (``loss``, ``lr``, ``grad_norm``, ``step_time_s``,
    ``samples_per_s``, counters, model metrics, and on detail steps ``time/*``)."""
    names = list(record.model_metrics)
    counts = torch.tensor([record.loss_sum, float(record.good)], dtype=torch.float64, device=strategy.device)
    model_means = [torch.stack(record.model_metrics[k]).double().mean() for k in names]
    # One collective and one host transfer for the loss and every model metric.
    mean = strategy.all_reduce_mean(torch.cat([counts, torch.stack(model_means)]) if names else counts).tolist()
    loss_sum, good = mean[0], mean[1]
    global_batch = args.per_device_batch_size * args.gradient_accumulation_steps * strategy.world_size
    out: dict[str, float] = {}
    if -1 in args.loss_log_rank:
        out["loss"] = loss_sum / good if good > 0 else math.nan
    ranks = [r for r in args.loss_log_rank if r >= 0]
    if ranks:
        per_rank = _rank_losses(record, strategy, ranks)
        out.setdefault("loss", per_rank[f"loss/rank{ranks[0]}"])
        if strategy.world_size > 1 or len(ranks) > 1:
            out.update(per_rank)
    default_lr = next(iter(record.lrs.values()))
    out.update({
        "lr": record.lrs.get("default", default_lr),
        "grad_norm": record.grad_norm,
        "step_time_s": record.step_time_s,
        "samples_per_s": global_batch / record.step_time_s if record.step_time_s > 0 else math.nan,
        **counters,
    })
    if len(record.lrs) > 1:
        out.update({f"lr/{name}": lr for name, lr in record.lrs.items()})
    out.update({key: value for key, value in zip(names, mean[2:], strict=True)})
    if record.timings is not None:
        out.update(_timings(record, strategy, args.timing_log_level))
    return out


def lrs_by_group(optimizer: torch.optim.Optimizer) -> dict[str, float]:
    """Current LR per ``--lr-group`` path (no-decay twins share their path's LR)."""
    out: dict[str, Any] = {}
    for group in optimizer.param_groups:
        name = str(group.get("name", "default")).removesuffix(" (no decay)")
        out.setdefault(name, group["lr"])
    return out
