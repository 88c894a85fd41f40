"""Which class serves a model as a policy, and the plugin provenance recorded in ``policy.json``.

A model plugin names its own policy class with ``ModelSpec.policy = "module:attr"`` (LingBot-VA's closed loop);
every other model is served by :class:`embodied_core.policy.runtime.TransformsPolicy`. A policy class implements
:class:`PolicyClass`: ``write_assets`` at every checkpoint save and ``from_folder`` in ``load_policy``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from embodied_core import registry
from embodied_core.errors import PluginError, PluginLoadError
from embodied_core.registry.groups import MODELS
from embodied_core.registry.specs import ModelSpec, import_object

if TYPE_CHECKING:
    from embodied_core.config.run_config import RunConfig
    from embodied_core.policy.load import PolicyFolder
    from embodied_core.protocols import Policy

__all__ = ["DEFAULT_POLICY_CLASS", "PolicyClass", "load_policy_class", "model_spec_for", "plugin_record"]

DEFAULT_POLICY_CLASS = "embodied_core.policy.runtime:TransformsPolicy"


class PolicyClass(Protocol):
    """What ``ModelSpec.policy`` names (a class, usually a subclass of ``TransformsPolicy``)."""

    @classmethod
    def write_assets(cls, config: RunConfig, directory: Path) -> dict[str, Any]:
        """Writes model-specific inference files into ``directory`` (the folder's ``assets/``) when a checkpoint
        is saved; returns a JSON-serializable record stored as ``policy.json["assets"]``."""
        ...

    @classmethod
    def from_folder(cls, folder: PolicyFolder, *, device: str, seed: int) -> Policy:
        """Builds the policy (model with weights, transforms, closed-loop state) from a loaded folder."""
        ...

    # Optional: ``references(cls, doc) -> dict[str, str]``, the paths ``from_folder`` will read besides core's
    # files (``{"policy.json assets.base_model_path": "/models/wan/vae"}``; relative ones are taken relative to the
    # folder; ``"hub:<id>"`` for a hub id). ``load_policy`` checks them with core's
    # (embodied_core.policy.references) before calling ``from_folder``: outside the folder they need
    # --allow-external-references.


def load_policy_class(spec: ModelSpec) -> PolicyClass:
    """The policy class of ``spec``: its ``policy`` entry, else the transforms policy."""
    path = spec.policy or DEFAULT_POLICY_CLASS
    try:
        return import_object(path)
    except Exception as exc:  # third-party import failures of any kind
        raise PluginLoadError(f"model plugin {spec.name!r}: its policy class {path!r} failed to import: "
                              f"{type(exc).__name__}: {exc}") from exc


def plugin_record(model_name: str) -> dict[str, str]:
    """``{"name", "distribution", "version", "entry_point"}`` of the installed model plugin ``model_name``."""
    entry = registry.get_entry(MODELS, model_name)
    return {"name": model_name, "distribution": entry.distribution, "version": entry.version,
            "entry_point": entry.value}


def model_spec_for(doc: dict[str, Any], *, source: Path) -> ModelSpec:
    """The installed spec of the model a policy folder records; PluginError naming what to install."""
    name = doc["model_name"]
    recorded = doc.get("plugin") or {}
    try:
        spec = registry.get_spec(MODELS, name)
    except PluginError as exc:
        dist = recorded.get("distribution", "the distribution that provides it")
        version = recorded.get("version", "")
        raise PluginError(f"{source}: the policy needs model plugin {name!r} from {dist} {version}".rstrip()
                          + f", which is not installed here ({exc}); install {dist}") from None
    if not isinstance(spec, ModelSpec):
        raise PluginError(f"{source}: plugin {name!r} is a {type(spec).__name__}, not a model plugin")
    return spec
