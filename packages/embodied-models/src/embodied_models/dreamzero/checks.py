"""Rules between DreamZero's ``model:`` and ``data:`` sections and the training flags (no torch).

Declared in the model specs' ``checks``, so they are reported with every other config problem before anything
is built.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["GEOMETRY_FIELDS", "check_run_config"]

GEOMETRY_FIELDS = (("num_frames", "num_frames"), ("action_horizon", "action_horizon"),
                   ("num_state_per_block", "state_horizon"), ("max_chunk_size", "max_chunk_size"),
                   ("num_frame_per_block", "num_frame_per_block"), ("max_state_dim", "max_state_dim"),
                   ("max_action_dim", "max_action_dim"), ("text_len", "max_text_length"))
"""(model field, data field) pairs that must agree: the strategy cuts samples with the data values."""


def check_run_config(config: object) -> list[str]:
    """Geometry of both sections agrees; LeRobot data goes through ``--dataset-strategy dreamzero``."""
    model, data, training = config.model, config.data, config.training  # type: ignore[attr-defined]
    problems = []
    for model_field, data_field in GEOMETRY_FIELDS:
        m, d = getattr(model, model_field), getattr(data, data_field, None)
        if d is not None and m != d:
            problems.append(f"model.{model_field}={m} but data.{data_field}={d}: the strategy cuts samples with the "
                            f"data value and the model expects its own; set both to the same value")
    if training.dataset_format == "lerobot_datasets" and training.dataset_strategy != "dreamzero":
        problems.append(f"{training.model_name} reads the dreamzero batch (images, text ids, padded state/action "
                        f"with masks): add --dataset-strategy dreamzero")
    if not model.online_encoders and "video_latents" not in (getattr(data, "cache_features", None) or []):
        problems.append("model.online_encoders=false needs cached video latents: set data.precomputed_cache_dir "
                        "and keep 'video_latents' in data.cache_features (embodied data precompute-dreamzero)")
    if training.use_lora and training.lora_modules_to_save is None and training.trainer_type != "dreamzero":
        problems.append(f"--use-lora with --trainer-type {training.trainer_type}: DreamZero's LoRA recipe also trains "
                        "the state/action encoders and the action decoder in full; use --trainer-type dreamzero (the "
                        "presets' default, which adds them) or pass --lora-modules-to-save "
                        "dit.state_encoder,dit.action_encoder,dit.action_decoder")
    for name, what in (("vae_path", "vae/ (AutoencoderKLWan)"), ("text_encoder_path", "text_encoder/ (UMT5)"),
                       ("image_encoder_path", "image_encoder/ (CLIP vision)")):
        folder = getattr(model, name)
        if folder and not Path(folder, "config.json").is_file():
            problems.append(f"model.{name}={folder}: no config.json there; expected the {what} folder of a Wan "
                            "diffusers release")
    folders = [f"model.{name}" for name in ("vae_path", "text_encoder_path", "image_encoder_path")
               if getattr(model, name)]
    if training.init_on_meta and folders and not training.pretrained_checkpoint:
        problems.append(f"--init-on-meta re-initializes the model after building it on the meta device; the frozen "
                        f"encoders of {', '.join(folders)} are read by --pretrained-checkpoint's load: give the Wan "
                        "DiT as --pretrained-checkpoint (model.pretrained_layout=diffusers)")
    return problems
