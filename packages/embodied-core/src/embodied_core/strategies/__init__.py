"""Distributed strategies: how the model and optimizer are wrapped and how gradients and state move."""
