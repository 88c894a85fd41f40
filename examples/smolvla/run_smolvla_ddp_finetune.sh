#!/usr/bin/env bash
# ============================================================================
# run_smolvla_ddp_finetune.sh - SmolVLA fine-tuning with DDP (one GPU by default; every rank holds the full
# model and optimizer). No unused-parameter search: the parameters no loss reaches are frozen by the model.
#
# Usage:
#   bash run_smolvla_ddp_finetune.sh
#   bash run_smolvla_ddp_finetune.sh --train-iters 50000                        # override a flag
#   bash run_smolvla_ddp_finetune.sh model.train_expert_only=false data.action_horizon=32   # dotlist
#   DATA_PATH=/data/my_lerobot NPROC_PER_NODE=4 bash run_smolvla_ddp_finetune.sh
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

smolvla_launch "DDP" \
    --distributed-strategy ddp \
    --no-ddp-find-unused-parameters \
    -- "$@"
