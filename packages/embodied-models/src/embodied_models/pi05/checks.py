"""Validation spanning pi0.5's ``model:``, ``data:`` and training sections (no torch)."""

from __future__ import annotations

from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig
from embodied_models.pi05.reference import checkpoint_config_problems
from embodied_models.vla.checks import multiple_problems, patch_multiple_problems, run_config_check, width_problems

__all__ = ["check_run_config", "size_problems"]


def size_problems(model: Pi05ModelConfig, data: Pi05DataConfig) -> list[str]:
    """Messages for model/data size combinations pi0.5 cannot run (empty when fine)."""
    problems = width_problems("action", data.action_dim, model.max_action_dim,
                              consequence=" (a new action projection, not loadable from a 32-dim checkpoint)")
    problems += width_problems("state", data.state_dim, model.max_state_dim)
    problems += patch_multiple_problems(data.image_size, model.vision_patch_size)
    problems += multiple_problems(model, ("num_heads", "num_kv_heads"), ("vision_width", "vision_num_heads"))
    if model.expert_width % 2:
        problems.append(f"model.expert_width must be even for the sin-cos time embedding (got {model.expert_width})")
    return problems


check_run_config = run_config_check(
    Pi05ModelConfig, Pi05DataConfig, size_problems, needs_folder=lambda model: model.tokenizer == "paligemma",
    folder_message="pi0.5 tokenizes its prompt with the PaliGemma tokenizer: pass --tokenizer-path DIR (a local "
    "Hugging Face tokenizer directory) or data.tokenizer_path=DIR; model.tokenizer=tiny uses the built-in tiny "
    "tokenizer instead", checkpoint_problems=checkpoint_config_problems,
    doc="Extra validation of a RunConfig whose model is pi0.5 (declared in the pi05 specs' ``checks``): sizes, the "
    "tokenizer folder, and a lerobot ``config.json`` beside ``--pretrained-checkpoint`` (read before anything is "
    "built; see embodied_models.pi05.reference).")
