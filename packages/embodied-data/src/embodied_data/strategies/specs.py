"""Entry-point specs of the dataset strategies (group ``embodied.dataset_strategies``; imports no torch)."""

from __future__ import annotations

from embodied_core.registry import PluginSpec

DEFAULT = PluginSpec(
    name="default",
    description="delta timestamps from the model's DataConfig (action horizon, state/image history, cameras)",
    factory="embodied_data.strategies.default:DefaultStrategy")
GROOT_N1_7 = PluginSpec(
    name="groot_n1_7",
    description="GR00T layout from meta/modality.json: state/action slices, video renames, annotation columns",
    factory="embodied_data.strategies.groot:GrootStrategy")
