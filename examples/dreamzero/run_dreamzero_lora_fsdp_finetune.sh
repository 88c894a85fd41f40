#!/usr/bin/env bash
# ============================================================================
# run_dreamzero_lora_fsdp_finetune.sh - DreamZero LoRA fine-tuning with FSDP2 (default: Wan2.2-TI2V-5B, DROID).
#
# LoRA (r 4, alpha 4, no dropout, as LoongForge) on the DiT blocks' self/cross-attention and FFN projections; the
# state/action encoders and the action decoder train in full (the dreamzero trainer's --lora-modules-to-save).
# Activation checkpointing of every DiT block except blocks 3 and 29 (LoongForge's selective skips for 5B).
#
# Usage:
#   bash run_dreamzero_lora_fsdp_finetune.sh
#   CACHE_DIR=/cache/droid bash run_dreamzero_lora_fsdp_finetune.sh           # precomputed latents / prompts
#   MODEL_NAME=dreamzero_wan21_14b WAN_DIR=/ckpt/Wan2.1-I2V-14B-480P-Diffusers AC_SKIP= \
#     bash run_dreamzero_lora_fsdp_finetune.sh --init-on-meta
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
MODEL_NAME=${MODEL_NAME:-"dreamzero_wan22_5b"}
AC_SKIP=${AC_SKIP-"dit.blocks.3,dit.blocks.29"}
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

dreamzero_launch "LoRA, FSDP2" \
    --use-lora \
    --lora-r "${LORA_R:-4}" \
    --lora-alpha "${LORA_ALPHA:-4}" \
    --lora-dropout "${LORA_DROPOUT:-0.0}" \
    -- "$@"
