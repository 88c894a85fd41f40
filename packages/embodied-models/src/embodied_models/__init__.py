"""embodied-models: model plugins (reached through the registry)."""

__version__ = "0.2.0"
