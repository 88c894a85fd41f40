"""Validation spanning GR00T N1.6's ``model:``, ``data:`` and training sections (no torch)."""

from __future__ import annotations

from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig
from embodied_models.groot_n1_6.embodiments import EMBODIMENT_SLOTS
from embodied_models.vla.checks import action_head_problems, run_config_check

__all__ = ["check_run_config", "size_problems"]


def size_problems(model: GrootN16ModelConfig, data: GrootN16DataConfig) -> list[str]:
    """Messages for model/data size combinations GR00T N1.6 cannot run (empty when fine)."""
    return action_head_problems(model, data, EMBODIMENT_SLOTS, factor=2 * model.vision_patch_size,
                                rule="2 x model.vision_patch_size", why=" (the projector merges 2 x 2 patches)")


check_run_config = run_config_check(
    GrootN16ModelConfig, GrootN16DataConfig, size_problems, needs_folder=lambda model: model.processor == "eagle",
    folder_message="GR00T N1.6 builds its prompt and image tokens with the Eagle processor: pass --tokenizer-path DIR "
    "(a local Eagle3 processor folder, e.g. a download of aravindhs-NV/eagle3-processor-groot-n1d6, with the "
    "tokenizer and chat template) or data.tokenizer_path=DIR; model.processor=tiny uses the built-in tiny processor "
    "instead")
"""Extra validation of a RunConfig whose model is GR00T N1.6 (declared in the specs' ``checks``)."""
