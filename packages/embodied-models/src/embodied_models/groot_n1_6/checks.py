"""Validation spanning GR00T N1.6's ``model:``, ``data:`` and training sections (no torch)."""

from __future__ import annotations

from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig
from embodied_models.groot_n1_6.embodiments import EMBODIMENT_SLOTS
from embodied_models.vla.checks import run_config_check, width_problems

__all__ = ["check_run_config", "size_problems"]


def size_problems(model: GrootN16ModelConfig, data: GrootN16DataConfig) -> list[str]:
    """Messages for model/data size combinations GR00T N1.6 cannot run (empty when fine)."""
    problems = width_problems("state", data.state_dim, model.max_state_dim,
                              consequence=f" (a new state encoder, not loadable from a {model.max_state_dim}-dim "
                              "checkpoint)")
    problems += width_problems("action", data.action_dim, model.max_action_dim)
    if data.action_horizon > model.action_horizon:
        problems.append(f"data.action_horizon {data.action_horizon} exceeds model.action_horizon "
                        f"{model.action_horizon} (the head denoises at most that many steps)")
    factor = 2 * model.vision_patch_size
    if any(side % factor for side in data.image_size):
        problems.append(f"data.image_size {tuple(data.image_size)} must be multiples of 2 x model.vision_patch_size "
                        f"= {factor} (the projector merges 2 x 2 patches)")
    slot = data.embodiment_id if data.embodiment_id is not None else EMBODIMENT_SLOTS.get(data.embodiment_tag)
    if slot is not None and slot >= model.max_num_embodiments:
        problems.append(f"embodiment slot {slot} (data.embodiment_tag {data.embodiment_tag!r}, data.embodiment_id "
                        f"{data.embodiment_id}) is not below model.max_num_embodiments {model.max_num_embodiments}")
    return problems


check_run_config = run_config_check(
    GrootN16ModelConfig, GrootN16DataConfig, size_problems, needs_folder=lambda model: model.processor == "eagle",
    folder_message="GR00T N1.6 builds its prompt and image tokens with the Eagle processor: pass --tokenizer-path DIR "
    "(a local Eagle3 processor folder, e.g. a download of aravindhs-NV/eagle3-processor-groot-n1d6, with the "
    "tokenizer and chat template) or data.tokenizer_path=DIR; model.processor=tiny uses the built-in tiny processor "
    "instead")
"""Extra validation of a RunConfig whose model is GR00T N1.6 (declared in the specs' ``checks``)."""
