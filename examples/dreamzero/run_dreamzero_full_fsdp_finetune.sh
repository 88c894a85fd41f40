#!/usr/bin/env bash
# ============================================================================
# run_dreamzero_full_fsdp_finetune.sh - DreamZero full fine-tuning with FSDP2 (default: Wan2.1-I2V-14B, DROID).
#
# The 14B model is built on the meta device (--init-on-meta): each rank materializes only its shards and the
# Wan release streams into them. Activation checkpointing of every DiT block (no skips, as LoongForge's 14B).
#
# Usage:
#   bash run_dreamzero_full_fsdp_finetune.sh
#   MODEL_NAME=dreamzero_wan22_5b WAN_DIR=/ckpt/Wan2.2-TI2V-5B-Diffusers INIT_ON_META=false \
#     bash run_dreamzero_full_fsdp_finetune.sh
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
MODEL_NAME=${MODEL_NAME:-"dreamzero_wan21_14b"}
WAN_DIR=${WAN_DIR-"/workspace/Wan2.1-I2V-14B-480P-Diffusers"}
AC_SKIP=${AC_SKIP-}
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

OWN=(--no-use-lora)
if [[ "${INIT_ON_META:-true}" == "true" ]]; then
    OWN+=(--init-on-meta)
fi
dreamzero_launch "full fine-tuning, FSDP2" "${OWN[@]}" -- "$@"
