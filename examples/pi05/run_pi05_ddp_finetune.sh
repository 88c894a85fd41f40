#!/usr/bin/env bash
# ============================================================================
# run_pi05_ddp_finetune.sh - pi0.5 fine-tuning with DDP (every rank holds the full model and optimizer).
#
# Usage:
#   bash run_pi05_ddp_finetune.sh
#   bash run_pi05_ddp_finetune.sh --train-iters 50000                   # override a flag
#   bash run_pi05_ddp_finetune.sh model.gradient_checkpointing=true data.action_horizon=32   # dotlist
#   DATA_PATH=/data/my_lerobot NPROC_PER_NODE=4 bash run_pi05_ddp_finetune.sh
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

pi05_launch "DDP" \
    --distributed-strategy ddp \
    --no-ddp-find-unused-parameters \
    -- "$@"
