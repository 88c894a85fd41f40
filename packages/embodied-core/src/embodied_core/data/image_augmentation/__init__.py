"""Image augmentation of training samples (``data.image_augmentation``): settings, the pipeline, its draws.

:func:`build_image_augmentation` turns a run's section into the :class:`ImageAugmentation` its training loader
applies (between decoding and the model's sample transform; never in ``load_policy``, ``embodied serve`` or
``embodied eval``). Ops and presets are plugins of ``embodied.image_augmentations`` (embodied-data provides the
torchvision ones); :func:`run_problems` reports a run's bad settings with the other configuration problems.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from embodied_core.data.image_augmentation.resolve import (
    IMAGE_PREFIX,
    SECTION,
    OpEntry,
    ResolvedAugmentation,
    augmentation_problems,
    camera_name,
    resolve_augmentation,
)

if TYPE_CHECKING:
    from embodied_core.config.run_config import RunConfig
    from embodied_core.data.image_augmentation.pipeline import ImageAugmentation

__all__ = ["IMAGE_PREFIX", "SECTION", "OpEntry", "ResolvedAugmentation", "augmentation_problems", "augmentation_record",
           "build_image_augmentation", "build_ops", "camera_name", "resolve_augmentation", "run_problems"]


def _section(config: RunConfig) -> Any:
    return getattr(config.data, "image_augmentation", None)


def _cameras(config: RunConfig) -> list[str] | None:
    keys = getattr(config.data, "camera_keys", None)
    return None if keys is None else list(keys)


def run_problems(config: RunConfig) -> list[str]:
    """Problems of the run's ``data.image_augmentation`` (empty when valid or unset), incl. missing packages."""
    section = _section(config)
    problems = []
    if config.training.record_augmentation_draws and (section is None or not section.enabled):
        problems.append(f"--record-augmentation-draws {config.training.record_augmentation_draws}: there is no "
                        f"augmentation to record; set {SECTION}.preset or {SECTION}.ops (or drop the flag)")
    if section is None or not section.enabled:
        return problems + (augmentation_problems(section, cameras=None) if section is not None else [])
    problems += augmentation_problems(section, cameras=_cameras(config))
    if problems:
        return problems
    settings = resolve_augmentation(section, cameras=_cameras(config))
    assert settings is not None
    return _missing_packages(settings)


def _missing_packages(settings: ResolvedAugmentation) -> list[str]:
    from embodied_core import registry
    from embodied_core.registry import groups

    problems = []
    for entry in settings.ops:
        spec = registry.get_spec(groups.IMAGE_AUGMENTATIONS, entry.name)
        missing = spec.missing_requirements()
        if missing:
            hint = f" ({spec.install_hint})" if spec.install_hint else ""
            problems.append(f"{SECTION}: op {entry.name} needs the package(s) {', '.join(missing)}, which are not "
                            f"installed{hint}")
    return sorted(set(problems))


def augmentation_record(config: RunConfig) -> dict[str, Any] | None:
    """The resolved settings of the run's augmentation as plain data (the preset expanded into its ops), or None
    when it has none: what a policy folder records about training."""
    section = _section(config)
    settings = resolve_augmentation(section) if section is not None else None
    return None if settings is None else settings.to_dict()


def build_ops(settings: ResolvedAugmentation) -> list[Any]:
    """The built op of each entry (its plugin's factory called with the entry's parameters)."""
    from embodied_core import registry
    from embodied_core.errors import ConfigError
    from embodied_core.registry import groups

    problems = _missing_packages(settings)
    if problems:
        raise ConfigError(problems)
    return [registry.load_factory(groups.IMAGE_AUGMENTATIONS, entry.name, flag=f"{SECTION}.ops op")(entry.params)
            for entry in settings.ops]


def build_image_augmentation(config: RunConfig, *, cameras: Sequence[str] | None = None) -> ImageAugmentation | None:
    """The run's augmentation, or None when ``data.image_augmentation`` asks for none.

    Args:
        cameras: the dataset's camera keys (its visual features): the keys augmented, which ``exclude_cameras``
            must name (default: ``data.camera_keys`` for the check, the ``observation.images.*`` keys of each sample
            for the augmentation).

    Raises:
        ConfigError: bad settings, or an op whose package is not installed (names the pip extra).
    """
    from embodied_core.data.image_augmentation.pipeline import ImageAugmentation

    section = _section(config)
    if section is None:
        return None
    settings = resolve_augmentation(section, cameras=_cameras(config) if cameras is None else list(cameras))
    if settings is None:
        return None
    seed_by_index = config.training.deterministic_mode and settings.deterministic_seed == "sample_index"
    return ImageAugmentation(settings, build_ops(settings), seed=config.training.seed, seed_by_index=seed_by_index,
                             camera_keys=cameras)
