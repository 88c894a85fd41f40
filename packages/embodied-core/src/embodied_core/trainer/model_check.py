"""A built model, adapted to the model-plugin protocol and checked, right after its factory returns it.

:func:`adapt_model` is the one place core looks at which members a model defines: a model lacking a required
member (``forward``; ``sample_actions`` for a policy) is a PluginError naming the plugin and each member; a model
lacking optional members gets the defaults of :class:`embodied_core.protocols.ModelDefaults` (its class is
swapped for a subclass adding them, as FSDP2's ``fully_shard`` swaps classes: same instance, same name, same
``isinstance``); a member returning another type than the declared one is an error, except the lists (and sets)
first-release plugins returned, which are converted with a FutureWarning. Everywhere else core calls the members
directly, without probing.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from torch import nn

from embodied_core.errors import PluginError
from embodied_core.protocols import (
    MODEL_MEMBERS,
    OPTIONAL_MODEL_MEMBERS,
    POLICY_MODEL_MEMBERS,
    REQUIRED_MODEL_MEMBERS,
    ModelDefaults,
    missing_members,
)

__all__ = ["DECLARED_RETURN_TYPES", "adapt_model", "check_model_plugin"]

DECLARED_RETURN_TYPES: dict[str, type] = {"fsdp_units": tuple, "no_weight_decay": frozenset,
                                          "default_lora_targets": tuple}
"""The argument-free protocol members and the one type each returns."""

_CONVERTIBLE = (list, tuple, set, frozenset)
"""Containers accepted (and converted, with a FutureWarning) where a tuple or frozenset is declared: API 1.0
plugins returned lists (the 0.1 template's ``fsdp_units`` and ``no_weight_decay``)."""

_ADAPTED: dict[tuple[type, tuple[str, ...], tuple[str, ...], str], type] = {}


def _where(model: Any, model_name: str) -> str:
    return f"--model-name {model_name}: the model its factory built ({type(model).__name__})"


def _no_sample_actions(model_name: str) -> Callable[..., Any]:
    def sample_actions(self: Any, batch: Any, noise: Any = None, num_steps: int | None = None) -> Any:
        raise PluginError(f"--model-name {model_name}: {type(self).__name__} implements no sample_actions, which "
                          "inference needs (load_policy, embodied serve, embodied eval)")

    return sample_actions


def _converting(method: Callable[..., Any], declared: type) -> Callable[..., Any]:
    @functools.wraps(method)
    def member(self: Any) -> Any:
        return declared(method(self))

    return member


def _adapted_class(cls: type, *, defaults: tuple[str, ...], converted: tuple[str, ...], model_name: str) -> type:
    """``cls`` plus the default members it lacks and converting wrappers of ``converted`` (cached per class)."""
    key = (cls, defaults, converted, model_name)
    if key not in _ADAPTED:
        namespace: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                     "__doc__": cls.__doc__, "__embodied_adapted_from__": cls}
        for name in defaults:
            namespace[name] = _no_sample_actions(model_name) if name == "sample_actions" else \
                ModelDefaults.__dict__[name]
        for name in converted:
            namespace[name] = _converting(getattr(cls, name), DECLARED_RETURN_TYPES[name])  # defined: checked
        _ADAPTED[key] = type(cls.__name__, (cls,), namespace)
    return _ADAPTED[key]


def adapt_model(model: Any, *, model_name: str, policy: bool = False) -> Any:
    """``model`` with the protocol's defaults for the optional members it lacks, checked; the same object.

    Args:
        model: what the model plugin's factory returned.
        model_name: the plugin, named in errors and warnings.
        policy: the model is built to be served as a policy, so ``sample_actions`` is required too; for training
            a model without one gets a stand-in that raises a PluginError when inference calls it.

    Raises:
        PluginError: a required member is missing, or an argument-free member returns another type than the
            declared one (beyond the converted containers).
    """
    required = (*REQUIRED_MODEL_MEMBERS, *POLICY_MODEL_MEMBERS) if policy else REQUIRED_MODEL_MEMBERS
    missing = missing_members(model, required)
    if isinstance(model, nn.Module) and type(model).forward is nn.Module.forward:
        missing.insert(0, "forward")  # nn.Module declares a forward that only raises; the model must define its own
    if missing:
        optional = ", ".join(OPTIONAL_MODEL_MEMBERS)
        raise PluginError(f"{_where(model, model_name)} lacks {', '.join(missing)} of the model-plugin protocol "
                          f"(embodied_core.protocols.ModelPlugin requires {', '.join(required)}; {optional} are "
                          "optional, with core's defaults)")
    defaults = tuple(missing_members(model, (*POLICY_MODEL_MEMBERS, *OPTIONAL_MODEL_MEMBERS)))
    converted = []
    for name, declared in DECLARED_RETURN_TYPES.items():
        if name in defaults:
            continue
        value = getattr(model, name)()  # defined by the model itself (not in ``defaults``)
        if not isinstance(value, declared) and isinstance(value, _CONVERTIBLE):
            warnings.warn(f"{_where(model, model_name)}: {name}() returned a {type(value).__name__}; the model-plugin "
                          f"protocol declares {declared.__name__} (API 1.1): converted, return a {declared.__name__} "
                          "to silence this", FutureWarning, stacklevel=2)
            converted.append(name)
    if defaults or converted:
        model.__class__ = _adapted_class(type(model), defaults=defaults, converted=tuple(converted),
                                         model_name=model_name)
    check_model_plugin(model, model_name=model_name)
    return model


def check_model_plugin(model: Any, *, model_name: str) -> None:
    """Raises a PluginError naming ``model_name`` and every protocol member ``model`` lacks or mistypes (a model
    that must define every member itself; :func:`adapt_model` first gives a model the defaults)."""
    missing = missing_members(model, MODEL_MEMBERS)
    if missing:
        raise PluginError(f"{_where(model, model_name)} lacks {', '.join(missing)} of the model-plugin protocol "
                          f"(embodied_core.protocols.ModelPlugin: {', '.join(MODEL_MEMBERS)}); adapt it with "
                          "embodied_core.trainer.model_check.adapt_model or subclass embodied_core.EmbodiedModel")
    returned = {"fsdp_units": model.fsdp_units(), "no_weight_decay": model.no_weight_decay(),
                "default_lora_targets": model.default_lora_targets()}
    wrong = [f"{name}() returned a {type(value).__name__}, the protocol declares {DECLARED_RETURN_TYPES[name].__name__}"
             for name, value in returned.items() if not isinstance(value, DECLARED_RETURN_TYPES[name])]
    if wrong:
        raise PluginError(f"{_where(model, model_name)}: {'; '.join(wrong)}")
