"""Synthetic LeRobot v3.0 datasets of a simple visual reaching task (``embodied data synth``)."""

from embodied_data.synth.task import TASKS, TaskParams
from embodied_data.synth.writer import SynthConfig, SynthSummary, write_synthetic_dataset

__all__ = ["TASKS", "SynthConfig", "SynthSummary", "TaskParams", "write_synthetic_dataset"]
