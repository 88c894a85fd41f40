"""Validation spanning X-VLA's ``model:``, ``data:`` and training sections (no torch)."""

from __future__ import annotations

from embodied_models.vla.checks import run_config_check, width_problems
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig
from embodied_models.xvla.layouts import layout_problems
from embodied_models.xvla.reference import checkpoint_config_problems

__all__ = ["check_run_config", "image_grid", "sequence_lengths", "size_problems"]


def image_grid(model: XvlaModelConfig, image_size: tuple[int, int]) -> tuple[int, int]:
    """(h, w) of the last DaViT grid for an image of ``image_size`` (each stage's stem convolution)."""
    h, w = image_size
    for k, s, p in zip(model.vision_patch_size, model.vision_patch_stride, model.vision_patch_padding, strict=False):
        h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return h, w


def sequence_lengths(model: XvlaModelConfig, data: XvlaDataConfig) -> tuple[int, int, int]:
    """(image tokens per view, BART encoder length, transformer length before the soft prompts)."""
    h, w = image_grid(model, data.image_size)
    per_view = 1 + h * w
    encoder = per_view + model.tokenizer_max_length
    return per_view, encoder, data.action_horizon + encoder + max(0, data.views() - 1) * per_view


def size_problems(model: XvlaModelConfig, data: XvlaDataConfig) -> list[str]:
    """Messages for model/data combinations X-VLA cannot run (empty when fine)."""
    state_width = model.max_state_dim if model.use_proprio else 0
    problems = layout_problems(model.action_mode, action_dim=data.action_dim, max_action_dim=model.max_action_dim,
                               state_width=state_width, normalization=data.normalization)
    if model.use_proprio:
        problems += width_problems("state", data.state_dim, model.max_state_dim,
                                   consequence=f" (a new action encoder, not loadable from a checkpoint built for "
                                   f"{model.max_state_dim}) or model.use_proprio=false")
    if data.domain_id >= model.num_domains:
        problems.append(f"data.domain_id {data.domain_id} is not below model.num_domains {model.num_domains}")
    if data.camera_keys is not None and data.views() < 1:
        problems.append("X-VLA needs at least one image view (data.camera_keys / data.num_image_views)")
    h, w = image_grid(model, data.image_size)
    if min(h, w) < 1:
        problems.append(f"data.image_size {tuple(data.image_size)} is too small for the DaViT stems (grid {h}x{w})")
    elif max(h, w) > model.vision_max_position_embeddings:
        problems.append(f"data.image_size {tuple(data.image_size)} gives a {h}x{w} DaViT grid but the position "
                        f"table has {model.vision_max_position_embeddings} rows "
                        "(model.vision_max_position_embeddings); use smaller images")
    per_view, encoder, total = sequence_lengths(model, data)
    if encoder > model.text_max_position_embeddings:
        problems.append(f"{per_view} image tokens + model.tokenizer_max_length {model.tokenizer_max_length} exceed "
                        f"BART's {model.text_max_position_embeddings} positions (model.text_max_position_embeddings)")
    if data.camera_keys is not None and total > model.max_len_seq:
        problems.append(f"the transformer sequence has {total} tokens (horizon {data.action_horizon}, encoder "
                        f"{encoder}, {data.views() - 1} auxiliary view(s) x {per_view}) but model.max_len_seq is "
                        f"{model.max_len_seq}")
    return problems


check_run_config = run_config_check(
    XvlaModelConfig, XvlaDataConfig, size_problems, needs_folder=lambda model: model.tokenizer == "bart",
    folder_message="X-VLA tokenizes its instruction with the BART tokenizer: pass --tokenizer-path DIR (a local "
    "Hugging Face tokenizer directory, e.g. facebook/bart-large) or data.tokenizer_path=DIR; model.tokenizer=bytes "
    "uses the built-in byte tokenizer instead", checkpoint_problems=checkpoint_config_problems,
    doc="Extra validation of a RunConfig whose model is X-VLA (declared in the xvla specs' ``checks``): sizes, the "
    "tokenizer folder, and a reference ``config.json`` beside ``--pretrained-checkpoint`` (read before anything is "
    "built; see embodied_models.xvla.reference).")
