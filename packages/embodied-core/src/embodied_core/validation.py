"""``validate_run_config``: every rule of a run, checked before any model, dataset or process group exists.

The rules come from three places, all called directly, so whether a rule runs never depends on which module
imported which spec:

- the configuration and the registry (:mod:`embodied_core.config.validate`): plugin names, loading every
  selected plugin, the ``checks`` each selected plugin's spec declares, flags no selected plugin reads, and
  rules spanning fields;
- the trainer's own flags (:mod:`embodied_core.trainer.checks`), the LoRA flags
  (:mod:`embodied_core.lora.options`) and the launch and distributed flags
  (:mod:`embodied_core.distributed.validation`);
- each section's ``validate()`` (the model's and the data config's own rules), and ``data.image_augmentation``
  (:mod:`embodied_core.data.image_augmentation`: ops, presets, ranges, cameras).

Every problem is reported together in one :class:`~embodied_core.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Iterable

from embodied_core.config.run_config import RunConfig
from embodied_core.config.validate import config_problems, world_size_from_env
from embodied_core.data.image_augmentation import run_problems as image_augmentation_problems
from embodied_core.distributed.validation import distributed_problems
from embodied_core.errors import ConfigError, NotSupportedYetError
from embodied_core.lora.options import lora_problems
from embodied_core.trainer.checks import check_trainer_flags

__all__ = ["run_config_problems", "validate_run_config"]


def run_config_problems(config: RunConfig, *, world_size: int, plugins: Iterable[str] = ()) -> tuple[list[str],
                                                                                                      list[str]]:
    """``(problems, not_supported_yet)``: every problem of ``config`` for a launch of ``world_size`` processes."""
    problems, unsupported = config_problems(config, world_size=world_size, plugins=plugins)
    problems.extend(distributed_problems(config.training))
    problems.extend(check_trainer_flags(config))
    problems.extend(lora_problems(config.training))
    problems.extend(config.model.validate())
    problems.extend(config.data.validate())
    problems.extend(image_augmentation_problems(config))
    return problems, unsupported


def validate_run_config(config: RunConfig, *, world_size: int | None = None, plugins: Iterable[str] = ()) -> None:
    """Raises one ConfigError (or NotSupportedYetError) listing every problem of ``config``.

    Args:
        world_size: processes of the launch (default: ``WORLD_SIZE`` of the environment).
        plugins: names of in-process hook plugins (``Trainer(plugins=...)``), so ``--block-plugins`` may name them.
    """
    world_size = world_size_from_env() if world_size is None else world_size
    problems, unsupported = run_config_problems(config, world_size=world_size, plugins=plugins)
    if problems:
        raise ConfigError(problems + unsupported)
    if unsupported:
        raise NotSupportedYetError("\n".join(unsupported))
