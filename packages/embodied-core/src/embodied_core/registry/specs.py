"""Plugin spec objects: small attrs records an entry point names.

A spec is data. Loading one imports its defining module, which must not import torch or any other heavy
package; the heavy code is named by ``factory`` (``"package.module:attr"``) and imported only when the
plugin is built.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import attrs

__all__ = ["DatasetFormatSpec", "ModelSpec", "PluginSpec", "import_object"]


def import_object(path: str) -> Any:
    """Imports ``"package.module:attr"`` (attr may be dotted) and returns the object."""
    module_name, sep, attr_path = path.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"expected 'package.module:attr', got {path!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj


def _check_factory_path(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    module_name, sep, attr_path = value.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(
            f"{type(instance).__name__}.{attribute.name} must look like 'package.module:attr', got {value!r}")


@attrs.frozen(kw_only=True)
class PluginSpec:
    """What an entry point of any ``embodied.*`` group names.

    Attributes:
        name: the name users select (``--optimizer AdamW``). Must equal the entry-point name.
        description: one line shown by ``embodied plugins``.
        factory: ``"module:attr"`` of the callable (or class) that builds the plugin; imported lazily.
        requires: importable top-level modules the plugin needs beyond its distribution's dependencies
            (e.g. ``("transformer_engine",)``). Checked without importing them when the config is
            validated, so a missing package is reported before anything heavy starts.
        install_hint: how to install what ``requires`` names.
    """

    name: str
    description: str = ""
    factory: str = attrs.field(validator=_check_factory_path)
    requires: tuple[str, ...] = ()
    install_hint: str = ""

    def missing_requirements(self) -> list[str]:
        """Names of ``requires`` modules that are not importable (found without importing them)."""
        return [mod for mod in self.requires if importlib.util.find_spec(mod) is None]

    def load_factory(self) -> Any:
        """Imports and returns the factory."""
        return import_object(self.factory)


@attrs.frozen(kw_only=True)
class ModelSpec(PluginSpec):
    """Spec of a model plugin (group ``embodied.models``).

    Attributes:
        model_config: attrs class of the ``model:`` section (a subclass of ``BaseModelConfig``).
        data_config: attrs class of the ``data:`` section (a subclass of ``BaseDataConfig``).
        default_yaml: ``"package:relative/file.yaml"`` with the default ``model:``/``data:`` values,
            or None when the attrs defaults are the defaults.
        transforms: ``"module:attr"`` of ``make_transforms(model_config, data_config, dataset)``, which
            returns the sample transform and collate function producing the model's PreparedBatch.
        factory: ``"module:attr"`` of ``build_model(model_config, data_config) -> nn.Module``.
    """

    model_config: type
    data_config: type
    default_yaml: str | None = None
    transforms: str | None = None
    uses_flags: tuple[str, ...] = ()
    """``TrainingArgs`` fields only some models read (``tokenizer_path``): set for a model that does not list
    it here, such a flag is an error rather than silently ignored."""

    def load_transforms(self) -> Any:
        """Imports and returns the transforms factory, or None when the model declares none."""
        return import_object(self.transforms) if self.transforms else None


@attrs.frozen(kw_only=True)
class DatasetFormatSpec(PluginSpec):
    """Spec of a dataset format (group ``embodied.dataset_formats``).

    Attributes:
        factory: ``"module:attr"`` of ``build_dataset(args: TrainingArgs, data_config) -> Dataset``
            returning sample dicts with the LeRobot keys (DESIGN 5).
        uses_flags: ``TrainingArgs`` fields this format reads beyond the common data flags. A data flag
            set away from its default that the selected format does not read is an error, never ignored.
        needs_path: whether ``--dataset-path`` is required.
        preflight: ``"module:attr"`` of ``check(args, data_config) -> list[str]``: problems found from the
            dataset's metadata alone (wrong version, missing keys or files), run before the model is built.
    """

    uses_flags: tuple[str, ...] = ()
    needs_path: bool = True
    preflight: str | None = None

    def run_preflight(self, args: Any, data_config: Any) -> list[str]:
        """Problems the format finds without loading data; [] when it declares no preflight."""
        return list(import_object(self.preflight)(args, data_config)) if self.preflight else []
