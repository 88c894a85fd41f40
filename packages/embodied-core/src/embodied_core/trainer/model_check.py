"""Checks a built model against the model-plugin protocol, right after its factory returns it.

Core calls the members of :class:`embodied_core.protocols.ModelPlugin` directly (no optional-member probing), so
a plugin lacking one, or returning another type than the declared one, is reported here, naming the plugin and
each member, before any weights are loaded or the model is wrapped.
"""

from __future__ import annotations

from typing import Any

from embodied_core.errors import PluginError
from embodied_core.protocols import MODEL_MEMBERS, missing_members

__all__ = ["DECLARED_RETURN_TYPES", "check_model_plugin"]

DECLARED_RETURN_TYPES: dict[str, type] = {"fsdp_units": tuple, "no_weight_decay": frozenset,
                                          "default_lora_targets": tuple}
"""The argument-free protocol members and the one type each returns."""

_HINT = ("subclass embodied_core.EmbodiedModel for the defaults of fsdp_units, no_weight_decay, "
         "load_pretrained_checkpoint, default_lora_targets and init_module_weights")


def check_model_plugin(model: Any, *, model_name: str) -> None:
    """Raises a PluginError naming ``model_name`` and every protocol member ``model`` lacks or mistypes."""
    where = f"--model-name {model_name}: the model its factory built ({type(model).__name__})"
    missing = missing_members(model, MODEL_MEMBERS)
    if missing:
        raise PluginError(f"{where} lacks {', '.join(missing)} of the model-plugin protocol "
                          f"(embodied_core.protocols.ModelPlugin: {', '.join(MODEL_MEMBERS)}); {_HINT}")
    returned = {"fsdp_units": model.fsdp_units(), "no_weight_decay": model.no_weight_decay(),
                "default_lora_targets": model.default_lora_targets()}
    wrong = [f"{name}() returned a {type(value).__name__}, the protocol declares {DECLARED_RETURN_TYPES[name].__name__}"
             for name, value in returned.items() if not isinstance(value, DECLARED_RETURN_TYPES[name])]
    if wrong:
        raise PluginError(f"{where}: {'; '.join(wrong)}")
