"""``data.image_augmentation`` -> the resolved settings of a run: preset merged, every op checked (no torch here).

Resolution reads only specs (the ``embodied.image_augmentations`` group) and the presets' settings, so every
problem of the section (unknown op or preset, a parameter out of range, an unknown camera) is reported with the
other configuration problems, before a dataset or a model is built; each names its path
(``data.image_augmentation.ops[1].brightness``) and what would be valid.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from embodied_core import registry
from embodied_core.config.converter import converter, structure
from embodied_core.config.image_augmentation import (
    CAMERA_DRAWS,
    COMPUTE_DTYPES,
    DETERMINISTIC_SEEDS,
    QUANTIZE,
    SETTINGS,
    ImageAugmentationConfig,
)
from embodied_core.errors import ConfigError, EmbodiedError, did_you_mean
from embodied_core.registry import groups
from embodied_core.registry.specs import ImageAugmentationPresetSpec, ImageOpSpec

__all__ = ["IMAGE_PREFIX", "SECTION", "OpEntry", "ResolvedAugmentation", "augmentation_problems", "camera_name",
           "resolve_augmentation"]

SECTION = "data.image_augmentation"
IMAGE_PREFIX = "observation.images."
COMMON_KEYS = ("op", "weight", "p", "skip_cameras")
"""Keys every op entry takes besides its own parameters."""

_DEFAULTS: dict[str, Any] = {"max_num_ops": None, "random_order": False, "camera_draws": "independent",
                             "compute_dtype": "uint8", "quantize": "round", "deterministic_seed": "run"}
_CHOICES: dict[str, tuple[str, ...]] = {"camera_draws": CAMERA_DRAWS, "compute_dtype": COMPUTE_DTYPES,
                                        "quantize": QUANTIZE, "deterministic_seed": DETERMINISTIC_SEEDS}


def camera_name(key: str) -> str:
    """``observation.images.wrist`` -> ``wrist`` (other keys unchanged)."""
    return key[len(IMAGE_PREFIX):] if key.startswith(IMAGE_PREFIX) else key


@attrs.frozen(kw_only=True)
class OpEntry:
    """One op of the pipeline: its plugin name, structured parameters and the common keys."""

    name: str
    params: Any
    weight: float = 1.0
    p: float = 1.0
    skip_cameras: tuple[str, ...] = ()

    def skips(self, camera_key: str) -> bool:
        """Whether this op leaves the camera ``camera_key`` alone (a ``skip_cameras`` pattern matches its name or
        key)."""
        name = camera_name(camera_key)
        return any(fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(camera_key, pattern)
                   for pattern in self.skip_cameras)


@attrs.frozen(kw_only=True)
class ResolvedAugmentation:
    """The settings a run's augmentation is built from (:func:`resolve_augmentation`)."""

    preset: str | None
    ops: tuple[OpEntry, ...]
    max_num_ops: int | None
    random_order: bool
    camera_draws: str
    exclude_cameras: tuple[str, ...]
    compute_dtype: str
    quantize: str
    deterministic_seed: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data of the settings (what the policy folder and the draws file record)."""
        from embodied_core.config.converter import unstructure

        return {"preset": self.preset,
                "ops": [{"op": e.name, **unstructure(e.params), "weight": e.weight, "p": e.p,
                         "skip_cameras": list(e.skip_cameras)} for e in self.ops],
                "max_num_ops": self.max_num_ops, "random_order": self.random_order,
                "camera_draws": self.camera_draws, "exclude_cameras": list(self.exclude_cameras),
                "compute_dtype": self.compute_dtype, "quantize": self.quantize,
                "deterministic_seed": self.deterministic_seed}


def _preset_settings(name: str, problems: list[str]) -> Mapping[str, Any] | None:
    where = f"{SECTION}.preset"
    try:
        spec = registry.get_spec(groups.IMAGE_AUGMENTATIONS, name, flag=where)
    except EmbodiedError as exc:
        problems.append(str(exc))
        return None
    if not isinstance(spec, ImageAugmentationPresetSpec):
        problems.append(f"{where}: {name!r} is an op, not a preset; presets: {', '.join(_names(preset=True))} "
                        f"(or list it under {SECTION}.ops)")
        return None
    settings = spec.load_factory()()
    unknown = sorted(set(settings) - {"ops", *SETTINGS})
    if unknown:  # the preset plugin's own bug: say whose
        problems.append(f"{where} {name}: the preset's settings have unknown keys {unknown}; valid: ops, "
                        f"{', '.join(SETTINGS)}")
        return None
    return settings


def _names(*, preset: bool) -> list[str]:
    out = []
    for name in registry.names(groups.IMAGE_AUGMENTATIONS):
        try:
            spec = registry.get_spec(groups.IMAGE_AUGMENTATIONS, name)
        except EmbodiedError:
            continue
        if isinstance(spec, ImageAugmentationPresetSpec) == preset:
            out.append(name)
    return out


def _structure_common(entry: Mapping[str, Any], path: str, problems: list[str]) -> dict[str, Any]:
    common: dict[str, Any] = {}
    for key in ("weight", "p"):
        if key in entry:
            try:
                common[key] = converter.structure(entry[key], float)
            except ValueError as exc:
                problems.append(f"{path}.{key}: {exc}")
    if common.get("weight", 1.0) < 0:
        problems.append(f"{path}.weight: must be >= 0 (got {common['weight']})")
    if not 0.0 <= common.get("p", 1.0) <= 1.0:
        problems.append(f"{path}.p: must be in [0, 1] (got {common['p']})")
    if "skip_cameras" in entry:
        patterns = entry["skip_cameras"]
        if isinstance(patterns, (list, tuple)) and all(isinstance(x, str) for x in patterns):
            common["skip_cameras"] = tuple(str(x) for x in patterns)
        else:
            problems.append(f"{path}.skip_cameras: expected a list of camera names or fnmatch patterns "
                            f"(e.g. ['*wrist*']), got {patterns!r}")
    return common


def _op_entry(entry: Any, path: str, problems: list[str]) -> OpEntry | None:
    if not isinstance(entry, Mapping) or "op" not in entry:
        problems.append(f"{path}: expected a mapping with an 'op' key naming the op (ops: "
                        f"{', '.join(_names(preset=False))}), got {entry!r}")
        return None
    name = str(entry["op"])
    try:
        spec = registry.get_spec(groups.IMAGE_AUGMENTATIONS, name, flag=f"{path}.op")
    except EmbodiedError as exc:
        problems.append(str(exc))
        return None
    if not isinstance(spec, ImageOpSpec):
        problems.append(f"{path}.op: {name!r} is a preset, not an op; ops: {', '.join(_names(preset=False))} "
                        f"(or select it with {SECTION}.preset)")
        return None
    common = _structure_common(entry, path, problems)
    raw = {k: v for k, v in entry.items() if k not in COMMON_KEYS}
    try:
        params = structure(raw, spec.params, path=path)
    except ConfigError as exc:
        # an unknown key may be meant for any op: name the keys every op takes too
        problems.extend(p + ", and every op's op, weight, p, skip_cameras" if "unknown key; valid keys:" in p else p
                        for p in exc.problems)
        return None
    return OpEntry(name=name, params=params, **common)


def _setting(section: ImageAugmentationConfig, settings: Mapping[str, Any], key: str, problems: list[str]) -> Any:
    value = getattr(section, key)
    if value is None:
        value = settings.get(key, _DEFAULTS[key])
    if key in _CHOICES and value not in _CHOICES[key]:
        problems.append(f"{SECTION}.{key}: must be one of {', '.join(_CHOICES[key])} (got {value!r})")
    return value


def _check_cameras(excluded: Sequence[str], cameras: Sequence[str], problems: list[str]) -> None:
    names = [camera_name(c) for c in cameras]
    for item in excluded:
        if item not in names and item not in cameras:
            problems.append(f"{SECTION}.exclude_cameras: {item!r} is not a camera of the dataset (cameras: "
                            f"{', '.join(names) or 'none'}){did_you_mean(item, names)}")


def resolve_augmentation(section: ImageAugmentationConfig, *,
                         cameras: Sequence[str] | None = None) -> ResolvedAugmentation | None:
    """The run's augmentation settings (None when the section asks for none).

    Args:
        section: the ``data.image_augmentation`` section.
        cameras: the dataset's camera keys (``observation.images.<cam>``); ``exclude_cameras`` must name them.
            None: not known yet (checked again when the dataset is built).

    Raises:
        ConfigError: every problem of the section, each with its path.
    """
    problems: list[str] = []
    resolved = _resolve(section, cameras, problems)
    if problems:
        raise ConfigError(problems)
    return resolved


def augmentation_problems(section: ImageAugmentationConfig, *, cameras: Sequence[str] | None) -> list[str]:
    """The problems :func:`resolve_augmentation` would raise (empty when the section is valid)."""
    problems: list[str] = []
    _resolve(section, cameras, problems)
    return problems


def _resolve(section: ImageAugmentationConfig, cameras: Sequence[str] | None,
             problems: list[str]) -> ResolvedAugmentation | None:
    if not section.enabled:
        if section.exclude_cameras:
            problems.append(f"{SECTION}.exclude_cameras is set but no augmentation is (set {SECTION}.preset or "
                            f"{SECTION}.ops)")
        return None
    settings: Mapping[str, Any] = {}
    if section.preset is not None:
        found = _preset_settings(section.preset, problems)
        if found is None:
            return None
        settings = found
    if section.ops:
        entries = [_op_entry(e, f"{SECTION}.ops[{i}]", problems) for i, e in enumerate(section.ops)]
    else:
        entries = [_op_entry(e, f"{SECTION}.preset {section.preset}: ops[{i}]", problems)
                   for i, e in enumerate(settings.get("ops", []))]
    ops = tuple(e for e in entries if e is not None)
    values = {key: _setting(section, settings, key, problems) for key in SETTINGS}
    if values["max_num_ops"] is not None and values["max_num_ops"] < 1:
        problems.append(f"{SECTION}.max_num_ops: must be >= 1 (got {values['max_num_ops']})")
    if len(entries) == len(ops) and not any(e.weight > 0 for e in ops):
        problems.append(f"{SECTION}.ops: no op with a weight above 0 (an empty pipeline); give an op or unset "
                        f"{SECTION}")
    if cameras is not None:
        _check_cameras(section.exclude_cameras, cameras, problems)
    return ResolvedAugmentation(preset=section.preset, ops=ops, exclude_cameras=tuple(section.exclude_cameras),
                                **values)
