"""Command-line entry points ``embodied serve`` and ``embodied eval``."""
