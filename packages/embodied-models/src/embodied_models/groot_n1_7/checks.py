"""Validation spanning GR00T N1.7's ``model:``, ``data:`` and training sections (no torch)."""

from __future__ import annotations

from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig
from embodied_models.groot_n1_7.embodiments import EMBODIMENT_SLOTS
from embodied_models.groot_n1_7.reference import checkpoint_config_problems
from embodied_models.vla.checks import action_head_problems, run_config_check

__all__ = ["check_run_config", "size_problems"]


def size_problems(model: GrootModelConfig, data: GrootDataConfig) -> list[str]:
    """Messages for model/data size combinations GR00T N1.7 cannot run (empty when fine)."""
    return action_head_problems(model, data, EMBODIMENT_SLOTS, factor=model.vision_patch_size * model.vision_merge_size,
                                rule="model.vision_patch_size x model.vision_merge_size")


check_run_config = run_config_check(
    GrootModelConfig, GrootDataConfig, size_problems, needs_folder=lambda model: model.processor == "qwen3_vl",
    folder_message="GR00T N1.7 builds its prompt and image tokens with the Qwen3-VL processor: pass --tokenizer-path "
    "DIR (a local Cosmos-Reason2-2B / Qwen3-VL folder with the tokenizer, chat template and preprocessor_config.json) "
    "or data.tokenizer_path=DIR; model.processor=tiny uses the built-in tiny processor instead",
    checkpoint_problems=checkpoint_config_problems,
    doc="Extra validation of a RunConfig whose model is GR00T N1.7 (declared in the specs' ``checks``): sizes, the "
    "processor folder, and a reference ``config.json`` beside ``--pretrained-checkpoint`` (read before anything is "
    "built; see embodied_models.groot_n1_7.reference).")
