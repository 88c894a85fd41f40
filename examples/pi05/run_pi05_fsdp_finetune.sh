#!/usr/bin/env bash
# ============================================================================
# run_pi05_fsdp_finetune.sh - pi0.5 fine-tuning with FSDP2 (parameters, gradients and optimizer sharded).
#
# The FSDP units are pi0.5's joint layers (VLM layer i + expert layer i, one module) and SigLIP encoder
# layers: Pi05Model.fsdp_units(). On several nodes, add --hsdp-shard-size auto for HSDP (shard within a
# node, replicate across nodes).
#
# Usage:
#   bash run_pi05_fsdp_finetune.sh
#   WORLD_SIZE=2 RANK=0 MASTER_ADDR=10.0.0.1 bash run_pi05_fsdp_finetune.sh --hsdp-shard-size auto
#   bash run_pi05_fsdp_finetune.sh model.gradient_checkpointing=true --per-device-batch-size 16
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

pi05_launch "FSDP2" \
    --distributed-strategy fsdp \
    --fsdp-wrap-modules Pi05Layer,SiglipEncoderLayer \
    -- "$@"
