"""X-VLA (Florence-2 encoder + soft-prompted flow-matching transformer) as an embodied model plugin."""
