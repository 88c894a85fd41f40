"""The ``embodied`` command line."""
