#!/usr/bin/env bash
# ============================================================================
# run_xvla_fsdp_finetune.sh - X-VLA fine-tuning with FSDP2 (parameters, gradients and optimizer sharded).
#
# The FSDP units are XvlaModel.fsdp_units(): the soft-prompted transformer blocks, the BART encoder layers and
# the DaViT blocks. On several nodes, add --hsdp-shard-size auto for HSDP (shard within a node, replicate across).
#
# Usage:
#   bash run_xvla_fsdp_finetune.sh
#   WORLD_SIZE=2 RANK=0 MASTER_ADDR=10.0.0.1 bash run_xvla_fsdp_finetune.sh --hsdp-shard-size auto
#   bash run_xvla_fsdp_finetune.sh model.gradient_checkpointing=true --per-device-batch-size 32
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

xvla_launch "FSDP2" \
    --distributed-strategy fsdp \
    --fsdp-wrap-modules XvlaBlock,BartEncoderLayer,Florence2VisionBlock \
    -- "$@"
