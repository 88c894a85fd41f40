"""Validation spanning SmolVLA's ``model:``, ``data:`` and training sections (no torch)."""

from __future__ import annotations

from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig
from embodied_models.smolvla.reference import checkpoint_config_problems
from embodied_models.vla.checks import patch_multiple_problems, run_config_check, width_problems

__all__ = ["check_run_config", "size_problems"]


def size_problems(model: SmolVLAModelConfig, data: SmolVLADataConfig) -> list[str]:
    """Messages for model/data size combinations SmolVLA cannot run (empty when fine)."""
    problems = width_problems("action", data.action_dim, model.max_action_dim,
                              consequence=" (a new action projection, not loadable from a 32-dim checkpoint)")
    problems += width_problems("state", data.state_dim, model.max_state_dim)
    side = data.image_size[0]
    patch_problems = patch_multiple_problems(data.image_size, model.vision_patch_size)
    if patch_problems:
        problems += patch_problems
    elif (side // model.vision_patch_size) % model.scale_factor:
        problems.append(f"data.image_size {tuple(data.image_size)} gives a {side // model.vision_patch_size}-patch "
                        f"grid, not divisible by the pixel shuffle model.scale_factor {model.scale_factor}")
    return problems


check_run_config = run_config_check(
    SmolVLAModelConfig, SmolVLADataConfig, size_problems, needs_folder=lambda model: model.tokenizer == "smolvlm",
    folder_message="SmolVLA tokenizes the task with SmolVLM2's tokenizer: pass --tokenizer-path DIR (a local Hugging "
    "Face tokenizer directory, e.g. HuggingFaceTB/SmolVLM2-500M-Video-Instruct's files) or data.tokenizer_path=DIR; "
    "model.tokenizer=tiny uses the built-in byte tokenizer instead", checkpoint_problems=checkpoint_config_problems,
    doc="Extra validation of a RunConfig whose model is SmolVLA (declared in the smolvla specs' ``checks``): sizes, "
    "the tokenizer folder, and a lerobot ``config.json`` beside ``--pretrained-checkpoint`` (read before anything is "
    "built; see embodied_models.smolvla.reference).")
