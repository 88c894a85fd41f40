"""Plugin spec objects: small attrs records an entry point names.

A spec is data. Loading one imports its defining module, which must not import torch or any other heavy
package; the heavy code is named by ``factory`` (``"package.module:attr"``) and imported only when the
plugin is built.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import attrs

from embodied_core.api_version import parse_requires_api
from embodied_core.protocols import DatasetFeature
from embodied_core.registry._paths import ObjectPath, import_object

__all__ = ["DatasetDefaults", "DatasetFormatSpec", "ImageAugmentationPresetSpec", "ImageOpSpec", "ModelSpec",
           "PluginSpec", "import_object"]


def _object_path(instance: Any, attribute: attrs.Attribute, value: str | None) -> None:
    if value is None:
        return
    try:
        ObjectPath.parse(value)
    except ValueError as exc:
        raise ValueError(f"{type(instance).__name__}.{attribute.name}: {exc}") from None


def _object_paths(instance: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    if isinstance(value, str):
        raise ValueError(f"{type(instance).__name__}.{attribute.name} is a tuple of 'package.module:attr' strings, "
                         f"got the single string {value!r} (write ({value!r},))")
    for item in value:
        _object_path(instance, attribute, item)


def _requires_api(instance: Any, attribute: attrs.Attribute, value: str | None) -> None:
    if value is None:
        return
    try:
        parse_requires_api(value)
    except ValueError as exc:
        raise ValueError(f"{type(instance).__name__}.{attribute.name}: {exc}") from None


def _options_class(instance: Any, attribute: attrs.Attribute, value: type | None) -> None:
    if value is not None and not attrs.has(value):
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be an attrs class, got {value!r}")


@attrs.frozen(kw_only=True)
class PluginSpec:
    """What an entry point of any ``embodied.*`` group names.

    Attributes:
        name: the name users select (``--optimizer AdamW``). Must equal the entry-point name.
        description: one line shown by ``embodied plugins``.
        factory: ``"module:attr"`` of the callable (or class) that builds the plugin; imported lazily (and
            imported once when a run is validated, so a broken plugin fails before the model is built).
        requires: importable top-level modules the plugin needs beyond its distribution's dependencies
            (e.g. ``("transformer_engine",)``). Checked without importing them when the config is
            validated, so a missing package is reported before anything heavy starts.
        install_hint: how to install what ``requires`` names.
        checks: ``"module:attr"`` of ``check(config: RunConfig) -> list[str]`` functions, run with every other
            validation of a run that selects this plugin (one message per problem; empty when fine).
        options: an attrs class (``kw_only``, a docstring under every field) of the plugin's own config
            fields. Their values live in the run's ``plugins.<name>`` section (YAML, ``plugins.<name>.x=1``
            dotlist, ``--plugins.<name>.x`` flags), are shown in ``--help`` and validated like model fields,
            and the factory receives the structured instance as the keyword argument ``options``.
        requires_api: the plugin-API versions the plugin works with, a PEP 440 specifier over
            ``embodied_core.PLUGIN_API_VERSION`` (``">=1.0,<2"``); None: any. Selecting a plugin whose requirement
            this core does not satisfy is a PluginError naming the plugin, its distribution, the requirement and
            core's API version (``embodied plugins --check`` lists it as a problem).
    """

    name: str
    description: str = ""
    factory: str = attrs.field(validator=_object_path)
    requires: tuple[str, ...] = ()
    install_hint: str = ""
    checks: tuple[str, ...] = attrs.field(default=(), validator=_object_paths)
    options: type | None = attrs.field(default=None, validator=_options_class)
    requires_api: str | None = attrs.field(default=None, validator=_requires_api)

    def missing_requirements(self) -> list[str]:
        """Names of ``requires`` modules that are not importable (found without importing them)."""
        return [mod for mod in self.requires if importlib.util.find_spec(mod) is None]

    def load_factory(self) -> Any:
        """Imports and returns the factory."""
        return import_object(self.factory)

    def run_checks(self, config: Any) -> list[str]:
        """The problems the declared ``checks`` find in ``config`` (a RunConfig), in declaration order."""
        problems: list[str] = []
        for path in self.checks:
            problems.extend(import_object(path)(config))
        return problems


@attrs.frozen(kw_only=True)
class ModelSpec(PluginSpec):
    """Spec of a model plugin (group ``embodied.models``).

    Attributes:
        model_config: attrs class of the ``model:`` section (a subclass of ``BaseModelConfig``).
        data_config: attrs class of the ``data:`` section (a subclass of ``BaseDataConfig``).
        default_yaml: ``"package:relative/file.yaml"`` with the default ``model:``/``data:`` values,
            or None when the attrs defaults are the defaults.
        transforms: ``"module:attr"`` of ``make_transforms(model_config, data_config, *, stats) -> Transforms``
            (:class:`embodied_core.protocols.MakeTransforms`): the sample transform, collate function and action
            postprocessing of the model, from the dataset statistics core resolved (or a policy folder's).
        factory: ``"module:attr"`` of ``build_model(model_config, data_config)``, returning a model implementing
            :class:`embodied_core.protocols.ModelPlugin` (checked when built).
        checks: rules spanning the ``model:``/``data:`` sections and the training flags (see PluginSpec);
            rules of one section belong in that config class's ``validate()``.
    """

    model_config: type
    data_config: type
    default_yaml: str | None = None
    transforms: str | None = attrs.field(default=None, validator=_object_path)
    uses_flags: tuple[str, ...] = ()
    """``TrainingArgs`` fields only some models read (``tokenizer_path``): set for a model that does not list
    it here, such a flag is an error rather than silently ignored."""
    policy: str | None = attrs.field(default=None, validator=_object_path)
    """``"module:attr"`` of the class that serves this model as a policy (``load_policy``; see
    ``embodied_core.policy.spec.PolicyClass``); None: the transforms policy (observation -> sample transform ->
    collate -> ``sample_actions`` -> ``postprocess_actions``)."""
    needs_task: bool = False
    """Whether the model reads the ``task`` string (language-conditioned): a policy then requires it in every
    observation."""

    def load_transforms(self) -> Any:
        """Imports and returns the transforms factory, or None when the model declares none."""
        return import_object(self.transforms) if self.transforms else None


def _positive(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if value < 1:
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be >= 1 (got {value!r})")


def _features(instance: Any, attribute: attrs.Attribute, value: tuple[DatasetFeature, ...] | None) -> None:
    if value is None:
        return
    if not isinstance(value, tuple) or not all(isinstance(f, DatasetFeature) for f in value):
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be a tuple of "
                         f"embodied_core.protocols.DatasetFeature (got {value!r})")
    keys = [f.key for f in value]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{type(instance).__name__}.{attribute.name} declares a key twice: {keys}")


@attrs.frozen(kw_only=True)
class DatasetDefaults:
    """What a dataset format declares in place of the :class:`embodied_core.data.MapDataset` defaults, for the
    members its datasets do not implement themselves (``DatasetFormatSpec.dataset_defaults``).

    Setting a value for a member the format's dataset implements itself is a PluginError (two sources for one
    member); members left None keep MapDataset's default.
    """

    fps: float | None = None
    """Frames per second of the recordings (default: None, no time base)."""
    features: tuple[DatasetFeature, ...] | None = attrs.field(default=None, validator=_features)
    """The features, in order (default: inferred from the first sample)."""
    stats: str | None = attrs.field(default=None, validator=_object_path)
    """``"module:attr"`` of ``stats(dataset) -> {key: {stat: array}}`` (default: computed from a bounded sample of
    items)."""
    episode_ranges: str | None = attrs.field(default=None, validator=_object_path)
    """``"module:attr"`` of ``episode_ranges(dataset) -> [(start, end), ...]`` (default: one episode, all items)."""
    stats_sample_size: int | None = attrs.field(default=None, validator=attrs.validators.optional(_positive))
    """How many evenly spaced items the computed stats read at most (default:
    ``MapDataset.stats_sample_size``, 1024)."""


@attrs.frozen(kw_only=True)
class DatasetFormatSpec(PluginSpec):
    """Spec of a dataset format (group ``embodied.dataset_formats``).

    Attributes:
        factory: ``"module:attr"`` of ``build_dataset(args: TrainingArgs, data_config) -> Dataset``
            returning sample dicts with the LeRobot keys (DESIGN 5): any object with ``__len__`` and
            ``__getitem__`` (a list of dicts); core gives it the other members of
            :class:`embodied_core.protocols.TrainingDataset` it lacks (``embodied_core.data.MapDataset``).
        uses_flags: ``TrainingArgs`` fields this format reads beyond the common data flags. A data flag
            set away from its default that the selected format does not read is an error, never ignored.
        needs_path: whether ``--dataset-path`` is required.
        preflight: ``"module:attr"`` of ``check(args, data_config) -> list[str]``: problems found from the
            dataset's metadata alone (wrong version, missing keys or files), run before the model is built.
        infer: ``"module:attr"`` of ``infer(args, data_config) -> embodied_core.config.infer.FeatureMetadata``:
            the features samples will carry, from metadata alone; core fills the data fields the user left
            unset (``state_dim``, ``action_dim``, ``camera_keys``, ``state_names``, ``action_names``) from it
            and reports set ones that disagree. None: those fields must be set.
        dataset_defaults: values replacing the defaults of the training-dataset members the factory's dataset
            does not implement (:class:`DatasetDefaults`); None: :class:`embodied_core.data.MapDataset`'s.
    """

    uses_flags: tuple[str, ...] = ()
    needs_path: bool = True
    preflight: str | None = attrs.field(default=None, validator=_object_path)
    infer: str | None = attrs.field(default=None, validator=_object_path)
    dataset_defaults: DatasetDefaults | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(DatasetDefaults)))

    def run_preflight(self, args: Any, data_config: Any) -> list[str]:
        """Problems the format finds without loading data; [] when it declares no preflight."""
        return list(import_object(self.preflight)(args, data_config)) if self.preflight else []

    def run_infer(self, args: Any, data_config: Any) -> Any:
        """The format's feature metadata for ``data_config`` (see ``infer``); call only when ``infer`` is set."""
        if self.infer is None:
            raise ValueError(f"dataset format {self.name} declares no infer function")
        return import_object(self.infer)(args, data_config)


@attrs.frozen(kw_only=True)
class ImageOpSpec(PluginSpec):
    """Spec of an image augmentation op (group ``embodied.image_augmentations``).

    Attributes:
        params: an attrs class (``kw_only``, a docstring under every field) of the op's parameters: an op entry of
            ``data.image_augmentation.ops`` (``{op: NAME, ...}``) is structured into it by the strict config
            converter, so unknown keys, wrong types and failed validators (a range out of bounds) are config errors
            naming the entry.
        factory: ``"module:attr"`` of ``build(params) -> op``, an object with ``draw(frames, *, input_size) ->
            dict`` (the op's random parameters, drawn from torch's global RNG, which the pipeline seeds per sample;
            plain JSON values, recorded by ``--record-augmentation-draws``) and ``apply(frames, params) -> frames``
            (:class:`embodied_core.data.image_augmentation.ImageOp`). ``frames`` are ``[..., C, H, W]``.
    """

    params: type = attrs.field(validator=_options_class)


@attrs.frozen(kw_only=True)
class ImageAugmentationPresetSpec(PluginSpec):
    """Spec of a named image augmentation (group ``embodied.image_augmentations``): ``data.image_augmentation.preset``.

    Attributes:
        factory: ``"module:attr"`` of a function taking no arguments that returns the preset's settings: a mapping
            with ``ops`` (a list of op entries, as in ``data.image_augmentation.ops``) and any of the pipeline
            settings of :class:`embodied_core.config.image_augmentation.ImageAugmentationConfig`
            (``max_num_ops``, ``random_order``, ``camera_draws``, ``compute_dtype``, ``quantize``,
            ``deterministic_seed``). Its module must not import torch.
        reference: what the preset reproduces (shown by ``embodied plugins``).
    """

    reference: str = ""
