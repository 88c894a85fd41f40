"""The training loop shared by every trainer.

``train()`` sets the order; each concern is a component built in :meth:`BaseTrainer.setup`. Model-specific
trainers subclass and override narrow methods (``build_model``, ``forward_backward``, ...), never the loop.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from pathlib import Path
from typing import Any

import attrs
import pluggy
import torch
import yaml
from torch import nn

from embodied_core.checkpoint.layout import checkpoints_root, find_latest
from embodied_core.config.provenance import embodied_versions, plugin_versions
from embodied_core.config.run_config import RunConfig
from embodied_core.config.validate import world_size_from_env
from embodied_core.errors import CheckpointError
from embodied_core.registry import groups
from embodied_core.registry.specs import ModelSpec
from embodied_core.trainer import components
from embodied_core.trainer.checkpointer import Checkpointer
from embodied_core.trainer.rng import capture_rng_state, restore_rng_state, seed_everything

__all__ = ["BaseTrainer", "TrainResult", "TrainState"]

logger = logging.getLogger("embodied.train")

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@attrs.define
class TrainState:
    """Counters that are part of the checkpoint."""

    step: int = 0
    consumed_samples: int = 0
    skipped_iters: int = 0
    nan_iters: int = 0


@attrs.define
class TrainResult:
    """What ``train()`` returns."""

    step: int
    output_dir: Path
    last_metrics: dict[str, float]
    checkpoint: Path | None


class BaseTrainer:
    """Single-loop trainer: setup -> steps -> finalize.

    Args:
        config: a validated run configuration.
        model_spec: the spec of ``config.training.model_name``.
        hooks: the plugin manager of lifecycle hooks.
    """

    def __init__(self, config: RunConfig, *, model_spec: ModelSpec, hooks: pluggy.PluginManager) -> None:
        self.config = config
        self.args = config.training
        self.model_spec = model_spec
        self.hooks = hooks
        self.output_dir = Path(self.args.output_dir)
        self.state = TrainState()
        self.last_metrics: dict[str, float] = {}
        self.last_checkpoint: Path | None = None

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Builds every component and restores state when resuming."""
        args = self.args
        self.strategy = components.build_strategy(args, world_size_from_env())
        self.strategy.setup()
        self.device = self.strategy.device
        seed_everything(args.seed)
        resume_path = self.resume_path()
        if self.strategy.is_main:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            self.write_config()
        self.model = self.strategy.wrap_model(self.build_model())
        self.optimizer = components.build_optimizer(self.model, args, self.strategy)
        self.scheduler = components.build_scheduler(self.optimizer, args)
        self.loader = components.build_data(self.config, self.model_spec, self.strategy)
        self.checkpointer = Checkpointer(self.output_dir, self.strategy, save_format=args.save_format,
                                         save_training_state=args.save_training_state,
                                         keep_last=args.save_total_limit)
        if resume_path is not None:
            self.restore(resume_path)
        self.loggers = components.build_loggers(args, output_dir=self.output_dir, is_main=self.strategy.is_main,
                                                resume_step=self.state.step if resume_path else None)
        for sink in self.loggers:
            sink.log_config(self.config.to_dict())
        self.autocast_dtype = _DTYPES[args.dtype]

    def build_model(self) -> nn.Module:
        """Builds the model from its plugin factory."""
        return self.model_spec.load_factory()(self.config.model, self.config.data)

    def resume_path(self) -> Path | None:
        """The checkpoint to resume from (``--resume-from``, or the newest with ``--resume``), or None."""
        if self.args.resume_from:
            path = Path(self.args.resume_from)
            if not path.is_dir():
                raise CheckpointError(f"--resume-from {path}: no such checkpoint directory")
            return path
        if self.args.resume:
            latest = find_latest(checkpoints_root(self.output_dir))
            if latest is None:
                logger.info("--resume: no checkpoint under %s yet; starting from step 0",
                            checkpoints_root(self.output_dir))
            return latest
        return None

    def write_config(self) -> None:
        """Writes ``config.yaml`` (the resolved config + versions); usable as ``--config-file``."""
        args = self.args
        selected = {groups.MODELS: self.config.model_name, groups.TRAINERS: args.trainer_type,
                    groups.DATASET_FORMATS: args.dataset_format, groups.OPTIMIZERS: args.optimizer,
                    groups.LR_SCHEDULERS: args.lr_decay_style, groups.SAMPLERS: args.distributed_sampler_mode}
        doc = {"embodied": {"versions": embodied_versions(), "plugins": plugin_versions(selected)},
               **self.config.to_dict()}
        (self.output_dir / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    def restore(self, path: Path) -> None:
        """Restores model, optimizer, scheduler, RNG, data position and counters from ``path``."""
        rank_state, shared = self.checkpointer.load(path, model=self.model, optimizer=self.optimizer,
                                                    scheduler=self.scheduler)
        self.state = TrainState(**shared["train_state"])
        restore_rng_state(rank_state["rng"])
        self.loader.load_state_dict(rank_state["dataloader"])
        self.hooks.hook.on_load_checkpoint(step=self.state.step, path=str(path))
        logger.info("resumed from %s at step %d", path, self.state.step)

    # ------------------------------------------------------------------ loop
    def train(self) -> TrainResult:
        """Runs setup, the training steps up to ``--train-iters`` and the final save."""
        self.setup()
        try:
            self.hooks.hook.on_train_start(config=self.config, model=self.strategy.unwrap_model(self.model),
                                           output_dir=str(self.output_dir), start_step=self.state.step)
            data_iter = iter(self.loader)
            while self.state.step < self.args.train_iters:
                metrics = self.train_step(data_iter)
                self.state.step += 1
                logged = self.log_step(metrics)
                self.hooks.hook.on_step_end(step=self.state.step, metrics=logged)
                if self.should_save():
                    self.save_checkpoint()
            return self.finalize()
        finally:
            self.close()

    def train_step(self, data_iter: Any) -> dict[str, torch.Tensor]:
        """One optimizer update over ``--gradient-accumulation-steps`` micro-batches.

        Returns device tensors (no host sync) except for the single check of whether to apply the update.
        """
        args = self.args
        started = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        accum = args.gradient_accumulation_steps
        loss_sum = torch.zeros((), device=self.device)
        good = torch.zeros((), device=self.device)
        model_metrics: dict[str, torch.Tensor] = {}
        data_time = 0.0
        for micro in range(accum):
            fetch_start = time.perf_counter()
            batch = next(data_iter).to(self.device)
            data_time += time.perf_counter() - fetch_start
            with self.strategy.grad_sync(self.model, sync=micro == accum - 1):
                raw_loss, metrics = self.forward_backward(batch, scale=1.0 / accum)
            ok = torch.isfinite(raw_loss) & (raw_loss <= args.loss_spike_threshold)
            loss_sum += torch.where(ok, raw_loss, 0.0)
            good += ok.float()
            for key, value in metrics.items():
                model_metrics[key] = model_metrics.get(key, 0.0) + value.detach().float() / accum
        grad_norm = self.strategy.clip_grad_norm(self.model, args.clip_grad)
        applied = self.apply_update(grad_norm, good, accum)
        lr = self.optimizer.param_groups[0]["lr"]  # the LR this update used
        self.scheduler.step()
        self.state.consumed_samples += args.per_device_batch_size * accum * self.strategy.world_size
        return {"loss_sum": loss_sum, "good": good, "grad_norm": grad_norm, "applied": applied, "lr": lr,
                "data_time_s": torch.tensor(data_time), "step_time_s": torch.tensor(time.perf_counter() - started),
                **{f"model/{k}": v for k, v in model_metrics.items()}}

    def forward_backward(self, batch: Any, *, scale: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Forward and backward of one micro-batch; a non-finite or spiking loss contributes zero.

        Returns the raw (unscaled, detached) loss and the model's metrics.
        """
        autocast = (torch.autocast(self.device.type, dtype=self.autocast_dtype)
                    if self.autocast_dtype != torch.float32 else contextlib.nullcontext())
        with autocast:
            output = self.model(batch)  # call the module, not .forward, so wrapper hooks run
        loss = output.loss.float()
        ok = torch.isfinite(loss) & (loss <= self.args.loss_spike_threshold)
        (torch.where(ok, loss, torch.zeros_like(loss)) * scale).backward()
        return loss.detach(), output.metrics

    def apply_update(self, grad_norm: torch.Tensor, good: torch.Tensor, accum: int) -> bool:
        """Steps the optimizer unless every micro-batch was skipped or gradients are not finite.

        This is the one host sync per step; it reads both checks in one transfer.
        """
        checks = torch.stack([good, torch.isfinite(grad_norm).float()]).tolist()
        num_good, grads_finite = int(checks[0]), bool(checks[1])
        if num_good < accum:
            self.state.skipped_iters += accum - num_good
        if self.args.check_for_nan_in_loss_and_grad and not grads_finite:
            self.state.nan_iters += 1
            logger.warning("step %d: non-finite gradient norm; update skipped (optimizer state untouched)",
                           self.state.step + 1)
            self.optimizer.zero_grad(set_to_none=True)
            return False
        if num_good == 0:
            logger.warning("step %d: every micro-batch loss was non-finite or above --loss-spike-threshold %g; "
                           "update skipped", self.state.step + 1, self.args.loss_spike_threshold)
            return False
        self.optimizer.step()
        return True

    def log_step(self, metrics: dict[str, Any]) -> dict[str, float] | None:
        """Reduces and writes metrics on logging steps; returns them (None on other steps)."""
        step = self.state.step
        if step % self.args.log_interval != 0 and step != self.args.train_iters:
            return None
        good = self.strategy.all_reduce_mean(metrics["good"].float())
        loss = self.strategy.all_reduce_mean(metrics["loss_sum"]) / torch.clamp(good, min=1e-12)
        step_time = float(metrics["step_time_s"])
        global_batch = self.args.per_device_batch_size * self.args.gradient_accumulation_steps * \
            self.strategy.world_size
        out = {
            "loss": float(loss) if float(good) > 0 else math.nan,
            "lr": metrics["lr"],
            "grad_norm": float(metrics["grad_norm"]),
            "step_time_s": step_time,
            "samples_per_s": global_batch / step_time if step_time > 0 else math.nan,
            "skipped_iters": self.state.skipped_iters,
            "nan_iters": self.state.nan_iters,
        }
        if self.args.detail_log_interval and step % self.args.detail_log_interval == 0:
            out["data_time_s"] = float(metrics["data_time_s"])
        for key, value in metrics.items():
            if key.startswith("model/"):
                out[key.removeprefix("model/")] = float(self.strategy.all_reduce_mean(value))
        self.last_metrics = out
        for sink in self.loggers:
            sink.log_metrics(step, out)
        return out

    # ------------------------------------------------------------------ checkpoints and end
    def should_save(self) -> bool:
        """True on ``--save-interval`` steps."""
        interval = self.args.save_interval
        return interval > 0 and self.state.step % interval == 0

    def save_checkpoint(self) -> Path:
        """Saves model, training state and counters for the current step."""
        rank_state = {"rng": capture_rng_state(), "dataloader": self.loader.state_dict()}
        shared = {"train_state": attrs.asdict(self.state)}
        path = self.checkpointer.save(self.state.step, model=self.model, optimizer=self.optimizer,
                                      scheduler=self.scheduler, rank_state=rank_state, shared_state=shared)
        self.last_checkpoint = path
        self.hooks.hook.on_save_checkpoint(step=self.state.step, path=str(path))
        return path

    def finalize(self) -> TrainResult:
        """Final checkpoint (when saving is on and the last step was not saved), summary and hooks."""
        if self.args.save_interval > 0 and not self.should_save() and self.state.step > 0:
            self.save_checkpoint()
        summary = {"final_step": self.state.step, "final_loss": self.last_metrics.get("loss"),
                   "skipped_iters": self.state.skipped_iters, "nan_iters": self.state.nan_iters,
                   "consumed_samples": self.state.consumed_samples}
        for sink in self.loggers:
            sink.log_summary(summary)
        self.hooks.hook.on_train_end(step=self.state.step, output_dir=str(self.output_dir), summary=summary)
        return TrainResult(step=self.state.step, output_dir=self.output_dir, last_metrics=self.last_metrics,
                           checkpoint=self.last_checkpoint)

    def close(self) -> None:
        """Closes loggers and the strategy (also after an exception)."""
        for sink in getattr(self, "loggers", []):
            with contextlib.suppress(Exception):
                sink.close()
        if hasattr(self, "strategy"):
            self.strategy.close()


def build_finetune_trainer(config: RunConfig, *, model_spec: ModelSpec,
                           hooks: pluggy.PluginManager) -> BaseTrainer:
    """Factory of ``FinetuneTrainer``."""
    return FinetuneTrainer(config, model_spec=model_spec, hooks=hooks)


class FinetuneTrainer(BaseTrainer):
    """The default trainer: supervised fine-tuning of any model plugin whose forward returns a loss."""


