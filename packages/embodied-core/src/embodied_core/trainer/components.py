"""Builders of the trainer's components from the registry: strategy, optimizer, schedule, data, loggers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch
from torch import nn

from embodied_core import registry
from embodied_core.config.run_config import RunConfig
from embodied_core.config.selection import selected_loggers
from embodied_core.config.training_args import TrainingArgs
from embodied_core.data.dataset import build_training_dataset, resolve_features, resolve_stats
from embodied_core.data.default_task import with_default_task
from embodied_core.data.image_augmentation import build_image_augmentation
from embodied_core.data.image_augmentation.draws import DRAWS_FILE, record_draws
from embodied_core.data.loader import ResumableLoader
from embodied_core.distributed.base import DistributedStrategy, SingleProcessStrategy
from embodied_core.loggers.base import MetricsLogger
from embodied_core.model_api import Transforms
from embodied_core.optim.param_groups import build_param_groups
from embodied_core.protocols import DatasetFeature, TrainingDataset
from embodied_core.registry import groups
from embodied_core.registry.specs import ModelSpec
from embodied_core.trainer.rng import rank_seed_offset

__all__ = ["TrainingData", "build_data", "build_loggers", "build_optimizer", "build_optimizer_from_groups",
           "build_scheduler", "build_strategy", "build_transforms", "parameter_groups"]


def build_strategy(args: TrainingArgs, world_size: int, *, options: Any = None) -> DistributedStrategy:
    """The distributed strategy; a single process runs unwrapped whatever ``--distributed-strategy`` says.

    ``options``: the strategy's structured options when its spec declares them (``RunConfig.plugins``).
    """
    if world_size == 1:
        return SingleProcessStrategy(args)
    factory = registry.load_factory(groups.DISTRIBUTED_STRATEGIES, args.distributed_strategy,
                                    flag="--distributed-strategy", options=options)
    return factory(args)


def parameter_groups(model: nn.Module, args: TrainingArgs) -> list[dict[str, Any]]:
    """Trainable parameters in optimizer groups (``--lr-group``, ``--weight-decay-grouping``)."""
    return build_param_groups(model, args)


def build_optimizer_from_groups(param_groups: list[dict[str, Any]], args: TrainingArgs,
                                strategy: DistributedStrategy, *, options: Any = None) -> torch.optim.Optimizer:
    """The ``--optimizer`` plugin over ``param_groups``, built through the strategy (ZeRO wraps it there).

    ``options``: the optimizer's structured options when its spec declares them (``RunConfig.plugins``).
    """
    factory = registry.load_factory(groups.OPTIMIZERS, args.optimizer, flag="--optimizer", options=options)
    return strategy.build_optimizer(param_groups, lambda groups_: factory(list(groups_), args))


def build_optimizer(model: nn.Module, args: TrainingArgs, strategy: DistributedStrategy) -> torch.optim.Optimizer:
    """The ``--optimizer`` plugin over :func:`parameter_groups`, built through the strategy."""
    return build_optimizer_from_groups(parameter_groups(model, args), args, strategy)


def build_scheduler(optimizer: torch.optim.Optimizer, args: TrainingArgs, *,
                    options: Any = None) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR applying the ``--lr-decay-style`` schedule to every group's own peak LR.

    ``options``: the schedule's structured options when its spec declares them (``RunConfig.plugins``).
    """
    lr_fn = registry.load_factory(groups.LR_SCHEDULERS, args.lr_decay_style, flag="--lr-decay-style",
                                  options=options)(args)

    def multiplier(base_lr: float) -> Any:
        return lambda step: lr_fn(step, base_lr) / base_lr if base_lr > 0 else 0.0

    return torch.optim.lr_scheduler.LambdaLR(optimizer, [multiplier(g["lr"]) for g in optimizer.param_groups])


@attrs.frozen(kw_only=True)
class TrainingData:
    """What :func:`build_data` resolved: the loader and what a checkpoint records about the data.

    Attributes:
        loader: the resumable loader over the transformed samples.
        dataset: the ``--dataset-format`` dataset (a :class:`~embodied_core.protocols.TrainingDataset`).
        stats: the statistics handed to ``make_transforms`` (None when the model declares no transforms).
        features: the dataset's feature metadata by key.
        transforms: the model's transforms (``Transforms()`` when it declares none).
        mixture: the dataset mixture's parts (embodiments, schedule) when the run trains on one; ``stats``,
            ``features`` are then its default embodiment's.
    """

    loader: ResumableLoader
    dataset: TrainingDataset
    stats: dict[str, dict[str, np.ndarray]] | None
    features: dict[str, DatasetFeature]
    transforms: Transforms
    mixture: Any = None


def build_transforms(config: RunConfig, spec: ModelSpec, dataset: TrainingDataset) -> tuple[
        Transforms, dict[str, dict[str, np.ndarray]] | None]:
    """The model's ``make_transforms(model, data, stats=...)`` with the dataset's statistics, resolved once;
    ``(Transforms(), None)`` for a model that declares no transforms."""
    make_transforms = spec.load_transforms()
    if make_transforms is None:
        return Transforms(), None
    stats = resolve_stats(dataset, format_name=config.training.dataset_format)
    return make_transforms(config.model, config.data, stats=stats), stats


def build_data(config: RunConfig, spec: ModelSpec, strategy: DistributedStrategy) -> TrainingData:
    """Dataset (``--dataset-format``, or the dataset mixture) + the model's transforms + sampler -> a resumable
    loader."""
    args = config.training
    mixture = None
    from embodied_core.data.mixture.drawn import mixture_draw_path

    if config.data_mixture is None and mixture_draw_path(config.data) is not None:
        from embodied_core.config.mixture import one_entry_mixture

        config = one_entry_mixture(config)  # the model draws its samples as from a mixture (drawn.py)
    if config.data_mixture is not None:
        from embodied_core.data.mixture import build_mixture

        mixture = build_mixture(config, spec, world_size=strategy.world_size)
        dataset: Any = mixture.dataset
        samples: Any = dataset
        transforms, stats = mixture.transforms, mixture.default.stats
        features = mixture.default.features
    else:
        dataset = build_training_dataset(args, config.data)
        transforms, stats = build_transforms(config, spec, dataset)
        samples = with_default_task(dataset, args.task_name)
        features = resolve_features(dataset, format_name=args.dataset_format)
    share_fn = registry.load_factory(groups.SAMPLERS, args.distributed_sampler_mode, flag="--distributed-sampler-mode",
                                     options=config.plugins.get(args.distributed_sampler_mode))(
                                         strategy.rank, strategy.world_size)
    # a mixture's embodiments may name their cameras differently: each one's cameras are augmented
    visual = [features] if mixture is None else [e.features for e in mixture.embodiments.values()]
    cameras = list(dict.fromkeys(k for part in visual for k, f in part.items() if f.is_visual))
    augmentation = build_image_augmentation(config, cameras=cameras)
    loader = ResumableLoader(
        samples,
        batch_size=args.per_device_batch_size,
        share_fn=share_fn,
        seed=args.seed,
        shuffle=args.sampler_shuffle,
        drop_last=args.batch_drop_last,
        rank_seed=rank_seed_offset(strategy.rank, enabled=args.set_seed_by_rank),
        sample_transform=transforms.sample_transform,
        collate_fn=transforms.collate_fn,
        augmentation=augmentation,
        num_workers=args.num_workers,
        multiprocessing_context=args.dataloader_multiprocessing_context,
        seed_workers=args.dataloader_seed_workers,
        pin_memory=strategy.device.type == "cuda",
        streaming=args.streaming,
        episode_ranges=dataset.episode_ranges() if args.streaming and mixture is None else None,
        order=mixture.order if mixture is not None else None,
    )
    if augmentation is not None and args.record_augmentation_draws and strategy.rank == 0:
        record_draws(Path(args.output_dir) / DRAWS_FILE, augmentation, samples,
                     [(0, i) for i in loader.epoch_indices(0)[:args.record_augmentation_draws]])
    return TrainingData(loader=loader, dataset=dataset, stats=stats, features=features, transforms=transforms,
                        mixture=mixture)


def build_loggers(args: TrainingArgs, *, output_dir: Path, is_main: bool, resume_step: int | None,
                  options: Mapping[str, Any] | None = None) -> list[MetricsLogger]:
    """The ``--loggers`` (default: every installed logger) not in ``--block-plugins`` that their flags enable.

    Args:
        options: ``RunConfig.plugins``: the structured options of loggers that declare them.
    """
    loggers = []
    for name in selected_loggers(args):
        factory = registry.load_factory(groups.LOGGERS, name, flag="--loggers", options=(options or {}).get(name))
        logger = factory(args, output_dir=output_dir, is_main=is_main, resume_step=resume_step)
        if logger is not None:
            loggers.append(logger)
    return loggers
