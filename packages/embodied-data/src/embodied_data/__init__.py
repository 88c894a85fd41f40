"""embodied-data: dataset formats, strategies and video backends for embodied (reached through the registry)."""

import embodied_core as _embodied_core  # noqa: F401  # first: its finder keeps deprecated embodied_data paths working

__version__ = "0.2.0"
