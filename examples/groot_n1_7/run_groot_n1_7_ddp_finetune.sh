#!/usr/bin/env bash
# ============================================================================
# run_groot_n1_7_ddp_finetune.sh - GR00T N1.7 fine-tuning with DDP (every rank holds the full model and
# optimizer). The Qwen3-VL backbone is frozen by default (model.tune_llm / model.tune_visual unfreeze it); the
# action head (~1.6B) trains.
#
# Usage:
#   bash run_groot_n1_7_ddp_finetune.sh
#   bash run_groot_n1_7_ddp_finetune.sh --train-iters 20000                      # override a flag
#   bash run_groot_n1_7_ddp_finetune.sh model.tune_visual=true data.action_horizon=40   # dotlist
#   DATA_PATH=/data/my_lerobot EMBODIMENT_TAG=libero_sim NPROC_PER_NODE=4 bash run_groot_n1_7_ddp_finetune.sh
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

groot_launch "DDP" \
    --distributed-strategy ddp \
    --no-ddp-find-unused-parameters \
    -- "$@"
