"""Optimizers, LR schedules and parameter grouping."""
