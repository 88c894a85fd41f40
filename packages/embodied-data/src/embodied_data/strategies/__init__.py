"""LeRobot dataset strategies (group ``embodied.dataset_strategies``): which keys, offsets and layout a model gets.

A strategy turns the model's DataConfig and the dataset metadata into a :class:`~embodied_data.strategies.base.
DatasetPlan` (delta timestamps, cameras, a per-sample transform). This package module stays light (specs).
"""
