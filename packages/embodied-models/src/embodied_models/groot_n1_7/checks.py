"""Validation spanning GR00T N1.7's ``model:``, ``data:`` and training sections (no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig
from embodied_models.groot_n1_7.embodiments import EMBODIMENT_SLOTS
from embodied_models.groot_n1_7.reference import checkpoint_config_problems
from embodied_models.vla.checks import run_config_check, width_problems

__all__ = ["check_run_config", "size_problems"]


def size_problems(model: GrootModelConfig, data: GrootDataConfig) -> list[str]:
    """Messages for model/data size combinations GR00T N1.7 cannot run (empty when fine)."""
    problems = width_problems("state", data.state_dim, model.max_state_dim,
                              consequence=f" (a new state encoder, not loadable from a {model.max_state_dim}-dim "
                              "checkpoint)")
    problems += width_problems("action", data.action_dim, model.max_action_dim)
    if data.action_horizon > model.action_horizon:
        problems.append(f"data.action_horizon {data.action_horizon} exceeds model.action_horizon "
                        f"{model.action_horizon} (the head denoises at most that many steps)")
    factor = model.vision_patch_size * model.vision_merge_size
    if any(side % factor for side in data.image_size):
        problems.append(f"data.image_size {tuple(data.image_size)} must be multiples of model.vision_patch_size x "
                        f"model.vision_merge_size = {factor}")
    slot = data.embodiment_id if data.embodiment_id is not None else EMBODIMENT_SLOTS.get(data.embodiment_tag)
    if slot is not None and slot >= model.max_num_embodiments:
        problems.append(f"embodiment slot {slot} (data.embodiment_tag {data.embodiment_tag!r}, data.embodiment_id "
                        f"{data.embodiment_id}) is not below model.max_num_embodiments {model.max_num_embodiments}")
    return problems


_size_and_processor_problems = run_config_check(
    GrootModelConfig, GrootDataConfig, size_problems, needs_folder=lambda model: model.processor == "qwen3_vl",
    folder_message="GR00T N1.7 builds its prompt and image tokens with the Qwen3-VL processor: pass --tokenizer-path "
    "DIR (a local Cosmos-Reason2-2B / Qwen3-VL folder with the tokenizer, chat template and preprocessor_config.json) "
    "or data.tokenizer_path=DIR; model.processor=tiny uses the built-in tiny processor instead")


def check_run_config(config: Any) -> list[str]:
    """Extra validation of a RunConfig whose model is GR00T N1.7 (declared in the specs' ``checks``): sizes, the
    processor folder, and a reference ``config.json`` beside ``--pretrained-checkpoint`` (read before anything is
    built; see embodied_models.groot_n1_7.reference)."""
    problems = _size_and_processor_problems(config)
    checkpoint = getattr(config.training, "pretrained_checkpoint", None)
    if isinstance(config.model, GrootModelConfig) and checkpoint and Path(checkpoint).exists():
        problems += checkpoint_config_problems(config.model, checkpoint)
    return problems
