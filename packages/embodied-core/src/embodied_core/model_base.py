"""``EmbodiedModel``: an ``nn.Module`` base class with the defaults of the model protocol.

A model plugin subclasses it and implements ``forward`` and ``sample_actions``; the other members of
:class:`embodied_core.protocols.ModelPlugin` default to "none declared" and to core's strict loader.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from torch import nn

if TYPE_CHECKING:
    from embodied_core.checkpoint.keymap import LoadReport

__all__ = ["EmbodiedModel"]


class EmbodiedModel(nn.Module):
    """Base class of model plugins: the protocol's optional members with their defaults."""

    def fsdp_units(self) -> tuple[type[nn.Module], ...]:
        """No declared FSDP units: FSDP picks repeated layers by size (``--fsdp-min-num-params``)."""
        return ()

    def no_weight_decay(self) -> frozenset[str]:
        """No parameters exempt from weight decay beyond biases and norm weights."""
        return frozenset()

    def load_pretrained_checkpoint(self, path: str | Path) -> LoadReport:
        """Strict load of an embodied checkpoint or a plain weights file with this module's own key names."""
        from embodied_core.checkpoint.pretrained import load_pretrained

        return load_pretrained(self, path)

    def default_lora_targets(self) -> tuple[str, ...]:
        """No declared LoRA targets."""
        return ()

    def init_module_weights(self, module: nn.Module) -> None:
        """Initializes what ``module`` holds the way building does: ``module.reset_parameters()`` for torch's layers
        (Linear, Conv, Embedding, norms); modules holding other parameters or buffers need an override."""
        reset = getattr(module, "reset_parameters", None)  # torch's layers, not a protocol member
        if callable(reset):
            reset()
