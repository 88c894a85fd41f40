"""Evaluation environments (entry-point group ``embodied.envs``)."""
