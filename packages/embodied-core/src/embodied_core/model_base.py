"""``EmbodiedModel``: an ``nn.Module`` base class with the defaults of the model protocol.

A model plugin subclasses it and implements ``forward`` and ``sample_actions``; the optional members of
:class:`embodied_core.protocols.ModelPlugin` come from :class:`embodied_core.protocols.ModelDefaults` ("none
declared", core's strict loader, ``reset_parameters``). Subclassing is a convenience: core gives a plain
``nn.Module`` the same defaults when it is built.
"""

from __future__ import annotations

from torch import nn

from embodied_core.protocols import ModelDefaults

__all__ = ["EmbodiedModel"]


class EmbodiedModel(nn.Module, ModelDefaults):
    """Base class of model plugins: the protocol's optional members with their defaults (override any of them)."""
