"""Distributed strategies (group ``embodied.distributed_strategies``): how the model and optimizer are
wrapped and how gradients and state move between processes."""
