"""embodied-dist: distributed strategies (reached through the registry)."""

__version__ = "0.2.0"
