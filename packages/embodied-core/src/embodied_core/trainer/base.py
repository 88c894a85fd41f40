"""The training loop shared by every trainer.

``train()`` sets the order; each concern is a component built in :meth:`BaseTrainer.setup`. Model-specific
trainers subclass and override narrow methods (``build_model``, ``forward_backward``, ...), never the loop.

Host syncs: one per update (:meth:`BaseTrainer.train_step` reads the losses and the gradient norm in one
transfer) plus one on logging steps (:func:`~embodied_core.trainer.metrics.reduce_step_metrics`); none per micro-batch.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pluggy
import torch
import yaml
from torch import nn

from embodied_core.checkpoint.checkpointer import Checkpointer
from embodied_core.checkpoint.layout import checkpoints_root
from embodied_core.checkpoint.validate import ResumeSelection, check_resumable
from embodied_core.config.provenance import embodied_versions, run_plugin_versions
from embodied_core.config.run_config import RunConfig
from embodied_core.config.validate import world_size_from_env
from embodied_core.errors import CheckpointError
from embodied_core.loggers.summary import write_loss_curve, write_summary
from embodied_core.model_api import Transforms
from embodied_core.optim.param_groups import build_param_groups, format_group_table
from embodied_core.policy.writer import PolicyWriter
from embodied_core.protocols import DatasetFeature
from embodied_core.registry.specs import ModelSpec
from embodied_core.trainer import components
from embodied_core.trainer.activation_checkpoint import apply_activation_checkpointing
from embodied_core.trainer.freeze import freeze_modules, parse_module_paths
from embodied_core.trainer.meta_init import build_on_meta, materialize
from embodied_core.trainer.metrics import StageTimer, StepRecord, lrs_by_group, reduce_step_metrics
from embodied_core.trainer.model_check import adapt_model
from embodied_core.trainer.profiling import build_step_profiler
from embodied_core.trainer.resume_checks import SCHEDULE_KEY, schedule_change_warning, schedule_record
from embodied_core.trainer.rng import capture_rng_state, rank_seed_offset, restore_rng_state, seed_everything
from embodied_core.trainer.runtime import RuntimeSettings, make_grad_scaler

__all__ = ["BaseTrainer", "TrainResult", "TrainState"]

logger = logging.getLogger("embodied.train")

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


@attrs.define
class TrainState:
    """Counters that are part of the checkpoint.

    Attributes:
        skipped_iters: micro-batches that contributed zero (loss NaN/Inf or above --loss-spike-threshold).
        nan_iters: micro-batches whose loss was NaN/Inf (a subset of ``skipped_iters``).
        skipped_updates: optimizer updates not applied (non-finite gradients, float16 overflow, or every
            micro-batch skipped); the optimizer state is untouched for them.
    """

    step: int = 0
    consumed_samples: int = 0
    skipped_iters: int = 0
    nan_iters: int = 0
    skipped_updates: int = 0


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
        self.loggers: list[Any] = []
        self.runtime = RuntimeSettings(self.args)
        # set by setup() from components.build_data: what a checkpoint records about the data
        self.data_stats: dict[str, dict[str, Any]] | None = None
        self.dataset_features: dict[str, DatasetFeature] = {}
        self.transforms = Transforms()

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Builds every component and restores state when resuming."""
        args = self.args
        self.strategy = components.build_strategy(args, world_size_from_env(),
                                                  options=self.config.plugins.get(args.distributed_strategy))
        self.strategy.setup()
        self.device = self.strategy.device
        self.runtime.apply()
        seed_everything(args.seed)
        resume_path = self.resume_path()
        if self.strategy.is_main:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            self.write_config()
        self._resume_candidate = resume_path  # a LoRA resume loads the base its checkpoint references
        # a dataset mixture is built first: its entries are checked on one sample each, so an entry the model
        # cannot batch is reported before a (possibly large) model is built; building it draws no global randomness
        early = (components.build_data(self.config, self.model_spec, self.strategy)
                 if self.config.data_mixture is not None else None)
        self.model = self.distribute_model(self.prepare_model(resuming=resume_path is not None),
                                           resuming=resume_path is not None)
        # The training streams (data, noise) start from --seed whatever building the model drew (nothing on the
        # meta device), offset by rank with --set-seed-by-rank; the initialization itself stays the same everywhere.
        seed_everything(args.seed + rank_seed_offset(self.strategy.rank, enabled=args.set_seed_by_rank))
        self.optimizer = self.build_optimizer()
        self.scheduler = components.build_scheduler(self.optimizer, args,
                                                    options=self.config.plugins.get(args.lr_decay_style))
        self.scaler = make_grad_scaler(args, self.device)
        data = early if early is not None else components.build_data(self.config, self.model_spec, self.strategy)
        self.loader = data.loader
        self.data_mixture = data.mixture
        self.data_stats = data.stats  # what make_transforms received (None: the model declares no transforms)
        self.dataset_features = data.features
        self.transforms = data.transforms
        self.checkpointer = Checkpointer(self.output_dir, self.strategy,
                                         save_format="lora" if args.use_lora else args.save_format,
                                         save_training_state=args.save_training_state,
                                         keep_last=args.save_total_limit, async_save=args.async_save,
                                         write_extras=self.build_policy_writer(fps=data.dataset.fps))
        if resume_path is not None:
            self.restore(resume_path)
        self.loggers = components.build_loggers(args, output_dir=self.output_dir, is_main=self.strategy.is_main,
                                                resume_step=self.state.step if resume_path else None,
                                                options=self.config.plugins)
        for sink in self.loggers:
            sink.log_config(self.config.to_dict())
        self.profiler = build_step_profiler(args, rank=self.strategy.rank)
        dtype = _DTYPES[args.dtype]
        self.autocast: Callable[[], Any] = (functools.partial(torch.autocast, self.device.type, dtype=dtype)
                                            if dtype != torch.float32 else contextlib.nullcontext)

    def build_policy_writer(self, *, fps: float | None) -> PolicyWriter | None:
        """What makes every checkpoint a policy folder (rank 0 writes it): the resolved configs, the statistics
        handed to ``make_transforms``, the dataset's features and fps; None on other ranks."""
        if not self.strategy.is_main:
            return None
        return PolicyWriter(self.config, self.model_spec, stats=self.data_stats, features=self.dataset_features,
                            fps=fps, mixture=getattr(self, "data_mixture", None))

    def build_model(self) -> nn.Module:
        """Builds the model from its plugin factory."""
        return self.model_spec.load_factory()(self.config.model, self.config.data)

    def build_adapted_model(self) -> nn.Module:
        """:meth:`build_model`, adapted to the model-plugin protocol: the optional members it lacks get core's
        defaults, and a PluginError names a missing required member or a mistyped one (``adapt_model``)."""
        return adapt_model(self.build_model(), model_name=self.model_spec.name)

    def prepare_model(self, *, resuming: bool) -> nn.Module:
        """The model with ``--pretrained-checkpoint`` loaded (unless resuming), LoRA adapters injected
        (``--use-lora``) and ``--freeze-modules`` frozen.

        The model is adapted to the model-plugin protocol as soon as it is built (:meth:`build_adapted_model`)."""
        model = self.build_on_meta() if self.args.init_on_meta else self.build_adapted_model()
        if self.args.use_lora:
            self.apply_lora(model)
        elif self.args.pretrained_checkpoint and not self.materializes_after_wrapping:  # else distribute_model
            if resuming:
                logger.info("--pretrained-checkpoint %s not loaded: resuming restores all weights",
                            self.args.pretrained_checkpoint)
            else:
                self.load_pretrained(model, self.args.pretrained_checkpoint)
        report = freeze_modules(model, parse_module_paths(self.args.freeze_modules))
        if self.strategy.is_main:
            logger.info("%s", report)
        return model

    def apply_lora(self, model: nn.Module) -> None:
        """``--use-lora``: loads the base weights (also when resuming: a LoRA checkpoint holds only the adapters),
        injects PEFT's adapters into the model itself and freezes the base (:mod:`embodied_core.lora.training`)."""
        from embodied_core.lora.training import setup_lora

        report = setup_lora(model, self.args, output_dir=self.output_dir, is_main=self.strategy.is_main,
                            resume_path=getattr(self, "_resume_candidate", None), load_pretrained=self.load_pretrained)
        if self.strategy.is_main:
            logger.info("%s", report)

    def distribute_model(self, model: nn.Module, *, resuming: bool) -> nn.Module:
        """Activation checkpointing (``--activation-checkpoint-*`` and the model's own), ``--compile`` of the
        model's blocks, then the strategy's wrapping (DDP / FSDP). With ``--init-on-meta`` under FSDP the meta
        model is sharded first, then only this rank's shards are materialized and ``--pretrained-checkpoint`` is
        streamed into them."""
        report = apply_activation_checkpointing(model, patterns=self.args.activation_checkpoint_module_patterns,
                                                skip=self.args.activation_checkpoint_skip_modules)
        if self.strategy.is_main and (report.checkpointed or report.skipped):
            logger.info("%s", report)
        if self.args.compile:  # after LoRA and checkpointing, before wrapping (trainer/compile.py)
            from embodied_core.trainer.compile import compile_blocks

            compiled = compile_blocks(model, mode=self.args.compile_mode)
            if self.strategy.is_main:
                logger.info("%s", compiled)
        wrapped = self.strategy.wrap_model(model)
        if self.materializes_after_wrapping:
            self.materialize(model)  # FSDP shards the module in place: ``model`` now holds DTensor shards
            if self.args.pretrained_checkpoint and not resuming:
                self.load_pretrained(model, self.args.pretrained_checkpoint)
        return wrapped

    @property
    def materializes_after_wrapping(self) -> bool:
        """``--init-on-meta`` with a strategy that shards parameters (FSDP): the model stays on the meta device
        until it is sharded."""
        return self.args.init_on_meta and self.strategy.shards_parameters

    def build_on_meta(self) -> nn.Module:
        """``--init-on-meta``: the model built on the meta device; with one process or DDP it is materialized on
        this rank's device at once (a full copy on the device, none on the host when that is a GPU)."""
        model = build_on_meta(self.build_adapted_model)
        if not self.materializes_after_wrapping:
            self.materialize(model)
        return model

    def materialize(self, model: nn.Module) -> None:
        """Storage on the device for the meta tensors of ``model`` (local shards only under FSDP), filled by the
        model's own ``init_module_weights`` (seeded with ``--seed``, alike on every rank)."""
        report = materialize(model, device=self.device, init=model.init_module_weights, seed=self.args.seed)
        if self.strategy.is_main:
            logger.info("%s", report)

    def load_pretrained(self, model: nn.Module, path: str) -> None:
        """Loads pretrained weights strictly (one report type: :class:`embodied_core.checkpoint.keymap.LoadReport`).

        The model loads itself (``ModelPlugin.load_pretrained_checkpoint``: official/lerobot layouts through its
        declared key map; :class:`~embodied_core.model_base.EmbodiedModel`'s default is core's identity-map
        loader). Both read through core's guarded readers: a bad file is a CheckpointError naming it.
        """
        report = model.load_pretrained_checkpoint(path)
        if self.strategy.is_main:
            logger.info("--pretrained-checkpoint %s into %s (strict): %s", path, type(model).__name__, report)

    def build_optimizer(self) -> torch.optim.Optimizer:
        """The ``--optimizer`` over the parameter groups of ``--lr-group`` / ``--weight-decay-grouping``."""
        param_groups = build_param_groups(self.strategy.unwrap_model(self.model), self.args)
        if self.strategy.is_main:
            logger.info("optimizer %s parameter groups:\n%s", self.args.optimizer, format_group_table(param_groups))
        return components.build_optimizer_from_groups(param_groups, self.args, self.strategy,
                                                      options=self.config.plugins.get(self.args.optimizer))

    def resume_path(self) -> Path | None:
        """The checkpoint to resume from, or None; runs before the model is built.

        ``--resume-from``: that directory, with every file a resume reads checked now; a missing, truncated or
        unreadable one is a CheckpointError naming the file (no fallback: the user named the checkpoint).
        ``--resume``: the newest checkpoint of ``--output-dir`` passing the same checks; broken newer ones are
        skipped with a warning and listed in ``summary.json`` (``resume_fallbacks``). The fit of the weights to
        the model is checked in :meth:`restore`, before anything is restored.
        """
        self._resume_selection: ResumeSelection | None = None
        if self.args.resume_from:
            path = Path(self.args.resume_from)
            try:
                check_resumable(path, self.strategy)
            except CheckpointError as exc:
                raise CheckpointError(f"--resume-from {path}: {exc}") from None
            return path
        if self.args.resume:
            selection = ResumeSelection(checkpoints_root(self.output_dir), self.strategy)
            self._resume_selection = selection
            path = selection.first_complete()
            if path is None and selection.found_any:
                raise selection.nothing_usable()
            if path is None:
                logger.info("--resume: no checkpoint under %s yet; starting from step 0",
                            checkpoints_root(self.output_dir))
            return path
        return None

    def write_config(self) -> None:
        """Writes ``config.yaml`` (the resolved config + versions); usable as ``--config-file``."""
        plugins = run_plugin_versions(self.config, world_size=self.strategy.world_size,
                                      hooks=[name for name, _ in self.hooks.list_name_plugin()])
        doc = {"embodied": {"versions": embodied_versions(), "plugins": plugins}, **self.config.to_dict()}
        (self.output_dir / "config.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    def restore(self, path: Path) -> None:
        """Restores model, optimizer, scheduler, loss scale, RNG, data position and counters from ``path``.

        Every check runs before anything is restored; with ``--resume``, a checkpoint whose weights do not fit
        the model is skipped (warning) for the next newest that does.
        """
        selection = getattr(self, "_resume_selection", None)
        if selection is not None:
            path = selection.confirm(path, self.model, self.optimizer)
        rank_state, shared = self.checkpointer.load(path, model=self.model, optimizer=self.optimizer,
                                                    scheduler=self.scheduler)
        try:
            self.state = TrainState(**shared["train_state"])
        except TypeError as exc:
            raise CheckpointError(f"{path}: trainer_state.json 'train_state' does not fit {type(self).__name__} "
                                  f"({exc})") from None
        self._resumed_from = path
        warning = schedule_change_warning(shared.get(SCHEDULE_KEY), self.args, step=self.state.step, path=str(path))
        if warning and self.strategy.is_main:
            logger.warning("%s", warning)
        self.load_rank_state(rank_state, path=path)
        self.hooks.hook.on_load_checkpoint(step=self.state.step, path=str(path))
        logger.info("resumed from %s at step %d", path, self.state.step)

    def rank_state(self) -> dict[str, Any]:
        """This rank's checkpointed state: RNGs, data position, loss scale. Override to add entries (call super)."""
        state: dict[str, Any] = {"rng": capture_rng_state(), "dataloader": self.loader.state_dict()}
        if self.scaler is not None:
            state["grad_scaler"] = self.scaler.state_dict()
        return state

    def load_rank_state(self, state: dict[str, Any], *, path: Path) -> None:
        """Restores what :meth:`rank_state` saved (``path`` names the checkpoint in messages)."""
        restore_rng_state(state["rng"])
        self.loader.load_state_dict(state["dataloader"])
        if self.scaler is not None and "grad_scaler" in state:
            self.scaler.load_state_dict(state["grad_scaler"])

    # ------------------------------------------------------------------ loop
    def train(self) -> TrainResult:
        """Runs setup, the training steps up to ``--train-iters`` and the final save."""
        try:
            self.setup()  # inside the try: a failed setup still closes loggers and the process group
            self.hooks.hook.on_train_start(config=self.config, model=self.strategy.unwrap_model(self.model),
                                           output_dir=str(self.output_dir), start_step=self.state.step)
            self._started = (time.perf_counter(), self.state.step)
            self.model.train()
            data_iter = iter(self.loader)
            while self.state.step < self.args.train_iters:
                self.run_step(data_iter)
            return self.finalize()
        except Exception as exc:
            # under several processes: name the rank that failed or died, and leave no rank waiting for this one
            explained = self.strategy.on_failure(exc) if "strategy" in self.__dict__ else None
            if explained is None:
                raise
            raise explained from exc
        finally:
            self.close()

    def run_step(self, data_iter: Any) -> dict[str, float] | None:
        """One iteration of :meth:`train`'s loop: the update (inside the ``--use-*-profiler`` window), the step
        count, metrics on logging steps, the ``on_step_end`` hook, ``--manual-gc`` and the ``--save-interval``
        checkpoint. Returns the logged metrics (None on steps that do not log)."""
        with self.profiler.step(self.state.step + 1):  # --use-*-profiler window (absolute steps)
            record = self.train_step(data_iter)
        self.state.step += 1
        logged = self.log_step(record)
        on_step_end = self.hooks.hook.on_step_end
        if on_step_end.get_hookimpls():  # pluggy's dispatch costs microseconds even when no plugin implements it
            on_step_end(step=self.state.step, metrics=logged)
        self.runtime.on_step_end(self.state.step)
        if self.should_save():
            self.save_checkpoint()
        return logged

    def train_step(self, data_iter: Any) -> StepRecord:
        """One optimizer update over ``--gradient-accumulation-steps`` micro-batches.

        The micro-batch losses and the gradient norm come to the host together, once per step (the one
        host sync); everything else stays on the device until a logging step.
        """
        args = self.args
        detail = self.is_detail_step(self.state.step + 1)
        timer = StageTimer(self.device, sync=detail)
        if not self.model.training:  # a hook may have switched to eval; frozen modules stay in eval (freeze.py)
            self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        accum = args.gradient_accumulation_steps
        raw_losses: list[torch.Tensor] = []
        model_metrics: dict[str, list[torch.Tensor]] = {}
        for micro in range(accum):
            timer.start("data")
            batch = next(data_iter).to(self.device)
            timer.start("forward_backward")
            with self.strategy.grad_sync(self.model, sync=micro == accum - 1):
                raw_loss, metrics = self.forward_backward(batch, scale=1.0 / accum)
            raw_losses.append(raw_loss)
            for key, value in metrics.items():
                model_metrics.setdefault(key, []).append(value.detach())
        timer.start("optimizer")
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)  # clip and check the true gradients
        grad_norm = self.strategy.clip_grad_norm(self.model, args.clip_grad)
        host = torch.stack([*raw_losses, grad_norm.detach().float().reshape(()),
                            *self.good_on_all_ranks(raw_losses)]).tolist()
        losses, norm = host[:accum], host[accum]
        good = [x for x in losses if math.isfinite(x) and x <= args.loss_spike_threshold]
        num_nan = sum(not math.isfinite(x) for x in losses)
        applied = self.apply_update(num_good=len(good), num_nan=num_nan, grads_finite=math.isfinite(norm),
                                    num_good_all_ranks=round(host[accum + 1]) if len(host) > accum + 1 else None)
        lrs = lrs_by_group(self.optimizer)  # the LRs this update used
        self.step_scheduler(applied)
        timer.stop()
        self.state.consumed_samples += args.per_device_batch_size * accum * self.strategy.world_size
        return StepRecord(loss_sum=math.fsum(good), good=len(good), grad_norm=norm, applied=applied, lrs=lrs,
                          step_time_s=timer.elapsed(), timings=dict(timer.totals) if detail else None,
                          model_metrics=model_metrics)

    def forward_backward(self, batch: Any, *, scale: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Forward and backward of one micro-batch; a NaN/Inf loss or one above ``--loss-spike-threshold``
        (the raw loss, before dividing by the accumulation steps) contributes zero, decided on the device.

        In one process with one micro-batch per update the guard is left out: :meth:`train_step` skips the whole
        update after its one host sync when that loss is bad (:meth:`apply_update`), the same outcome without the
        guard's device ops and autograd nodes (3% of a tiny model's step on CPU). Under several processes it
        stays: a bad loss on one rank must not reach the others' gradients through the all-reduce.

        Returns the raw (unscaled, detached, float32) loss and the model's metrics.
        """
        with self.autocast():
            output = self.model(batch)  # call the module, not .forward, so wrapper hooks run
        loss = output.loss.float()
        if self.args.gradient_accumulation_steps == 1 and self.strategy.world_size == 1:
            contribution = loss
        else:
            contribution = torch.where(self.loss_counts(loss), loss * scale, 0.0)
        if self.scaler is not None:
            contribution = self.scaler.scale(contribution)
        contribution.backward()
        return loss.detach(), output.metrics

    def good_on_all_ranks(self, raw_losses: list[torch.Tensor]) -> list[torch.Tensor]:
        """Under several processes, ``[count]``: the good micro-batches of this step summed over all ranks (one
        small all-reduce, read with the step's one host transfer); ``[]`` in one process.

        The update is skipped only when no rank has a good micro-batch: a rank whose own micro-batches were all
        bad still applies the others' all-reduced gradients, so the ranks' parameters never diverge."""
        if self.strategy.world_size == 1:
            return []
        local = torch.stack([self.loss_counts(x) for x in raw_losses]).sum().float()
        return [self.strategy.all_reduce_mean(local) * self.strategy.world_size]

    def loss_counts(self, loss: torch.Tensor) -> torch.Tensor:
        """On the device, whether a raw micro-batch loss counts: finite and not above ``--loss-spike-threshold``
        (the host-side test in :meth:`train_step` is the same)."""
        return torch.isfinite(loss) & (loss <= self.args.loss_spike_threshold)

    def apply_update(self, *, num_good: int, num_nan: int, grads_finite: bool,
                     num_good_all_ranks: int | None = None) -> bool:
        """Steps the optimizer unless every micro-batch was skipped or the gradients are not finite.

        ``num_good_all_ranks`` (several processes): the good micro-batches over all ranks, which decides the
        skip instead of this rank's ``num_good`` (the counters stay this rank's). A skipped update leaves the
        optimizer state untouched and logs why.
        """
        accum = self.args.gradient_accumulation_steps
        self.state.skipped_iters += accum - num_good
        self.state.nan_iters += num_nan
        reason = None
        if (num_good if num_good_all_ranks is None else num_good_all_ranks) == 0:
            reason = (f"every micro-batch loss was NaN/Inf ({num_nan}) or above --loss-spike-threshold "
                      f"{self.args.loss_spike_threshold:g}" + (" on every rank" if num_good_all_ranks == 0 else ""))
        elif not grads_finite and self.scaler is not None:
            reason = "float16 gradients overflowed (the loss scale is lowered)"
        elif not grads_finite and self.args.check_for_nan_in_loss_and_grad:
            reason = "non-finite gradient norm" + (f" after {num_nan} NaN/Inf loss(es)" if num_nan else "")
        if reason is None:
            # The scaler's own step() would re-check for infs with a second sync; the check above covers it.
            self.optimizer.step()
        if self.scaler is not None:
            self.scaler.update()
        if reason is None:
            return True
        self.state.skipped_updates += 1
        logger.warning("step %d: update skipped (optimizer state untouched): %s", self.state.step + 1, reason)
        self.optimizer.zero_grad(set_to_none=True)
        return False

    def step_scheduler(self, applied: bool) -> None:
        """Advances the LR schedule by one update (also for a skipped update: the LR follows the step count)."""
        if applied:
            self.scheduler.step()
            return
        with warnings.catch_warnings():  # torch warns about a scheduler step without an optimizer step
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)`")
            self.scheduler.step()

    def is_log_step(self, step: int) -> bool:
        """True when ``step`` (1-based) logs metrics: every ``--log-interval`` steps and the last step."""
        return step % self.args.log_interval == 0 or step == self.args.train_iters

    def is_detail_step(self, step: int) -> bool:
        """True when ``step`` logs stage timings (a logging step that is a multiple of ``--detail-log-interval``)."""
        interval = self.args.detail_log_interval
        return bool(interval) and step % interval == 0 and self.is_log_step(step)

    def log_step(self, record: StepRecord) -> dict[str, float] | None:
        """Reduces and writes metrics on logging steps; returns them (None on other steps)."""
        if not self.is_log_step(self.state.step):
            return None
        counters = {"skipped_iters": self.state.skipped_iters, "nan_iters": self.state.nan_iters,
                    "skipped_updates": self.state.skipped_updates}
        if self.scaler is not None:
            counters["loss_scale"] = self.scaler.get_scale()
        out = reduce_step_metrics(record, args=self.args, strategy=self.strategy, counters=counters)
        self.last_metrics = out
        for sink in self.loggers:
            sink.log_metrics(self.state.step, out)
        return out

    # ------------------------------------------------------------------ checkpoints and end
    def should_save(self) -> bool:
        """True on ``--save-interval`` steps."""
        interval = self.args.save_interval
        return interval > 0 and self.state.step % interval == 0

    def save_checkpoint(self) -> Path:
        """Saves model, training state and counters for the current step."""
        shared = {"train_state": attrs.asdict(self.state), SCHEDULE_KEY: schedule_record(self.args)}
        path = self.checkpointer.save(self.state.step, model=self.model, optimizer=self.optimizer,
                                      scheduler=self.scheduler, rank_state=self.rank_state(), shared_state=shared)
        self.last_checkpoint = path
        self.hooks.hook.on_save_checkpoint(step=self.state.step, path=str(path))
        return path

    def summary(self) -> dict[str, Any]:
        """End-of-run figures: final step and loss, counters, wall time and update rate of this process."""
        started, start_step = getattr(self, "_started", (time.perf_counter(), self.state.step))
        seconds = time.perf_counter() - started
        steps = self.state.step - start_step
        selection = getattr(self, "_resume_selection", None)
        resumed = getattr(self, "_resumed_from", None)
        return {"final_step": self.state.step, "final_loss": self.last_metrics.get("loss"),
                "resumed_from": str(resumed) if resumed else None,
                "resume_fallbacks": [f.to_dict() for f in selection.fallbacks] if selection is not None else [],
                "skipped_iters": self.state.skipped_iters, "nan_iters": self.state.nan_iters,
                "skipped_updates": self.state.skipped_updates, "consumed_samples": self.state.consumed_samples,
                "steps_this_run": steps, "train_seconds": round(seconds, 3),
                "steps_per_s": round(steps / seconds, 3) if seconds > 0 else None,
                "last_checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None}

    def finalize(self) -> TrainResult:
        """Final checkpoint (when saving is on and the last step was not saved), summary, loss curve, hooks."""
        if self.args.save_interval > 0 and not self.should_save() and self.state.step > 0:
            self.save_checkpoint()
        self.checkpointer.wait()  # an async save in flight is committed before the run reports its end
        summary = self.summary()
        for sink in self.loggers:
            sink.log_summary(summary)
        if self.strategy.is_main:
            write_summary(self.output_dir, summary)
            write_loss_curve(self.output_dir)
        self.hooks.hook.on_train_end(step=self.state.step, output_dir=str(self.output_dir), summary=summary)
        return TrainResult(step=self.state.step, output_dir=self.output_dir, last_metrics=self.last_metrics,
                           checkpoint=self.last_checkpoint)

    def close(self) -> None:
        """Closes loggers, restores global settings and closes the strategy (also after an exception)."""
        if "profiler" in self.__dict__:
            self.profiler.close()
        if hasattr(self.__dict__.get("loader"), "close"):
            self.loader.close()  # its DataLoader workers persist across epochs: stop them with the run
        for sink in self.loggers:
            with contextlib.suppress(Exception):
                sink.close()
        self.runtime.restore()
        if hasattr(self, "strategy"):
            # Drop the distribution wrapper (the user's module stays in self.model) before the process group
            # goes: a DDP reducer freed after its group was destroyed can hang gloo's destructor on one rank,
            # leaving torchrun waiting forever.
            if "model" in self.__dict__:
                self.model = self.strategy.unwrap_model(self.model)
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                gc.collect()  # a full collection costs ~0.2 s with torch loaded: only where a group exists
            self.strategy.close()


def build_finetune_trainer(config: RunConfig, *, model_spec: ModelSpec,
                           hooks: pluggy.PluginManager) -> BaseTrainer:
    """Factory of ``FinetuneTrainer``."""
    return FinetuneTrainer(config, model_spec=model_spec, hooks=hooks)


class FinetuneTrainer(BaseTrainer):
    """The default trainer: supervised fine-tuning of any model plugin whose forward returns a loss."""
