"""embodied-data: dataset formats, strategies and video backends for embodied (reached through the registry)."""

__version__ = "0.1.0"
