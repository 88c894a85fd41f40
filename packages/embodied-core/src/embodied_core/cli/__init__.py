"""The ``embodied`` command line. Plugin sub-commands use :func:`run_guarded` for the exit-code contract."""

from embodied_core.cli._errors import run_guarded

__all__ = ["run_guarded"]
