#!/usr/bin/env bash
# ============================================================================
# run_groot_n1_6_ddp_finetune.sh - GR00T N1.6 fine-tuning with DDP (every rank holds the full model and
# optimizer). The Eagle3 backbone is frozen but for its top 4 language layers (model.tune_top_llm_layers); the
# action head (~1.4B) trains.
#
# Usage:
#   bash run_groot_n1_6_ddp_finetune.sh
#   bash run_groot_n1_6_ddp_finetune.sh --train-iters 20000                       # override a flag
#   bash run_groot_n1_6_ddp_finetune.sh model.tune_visual=true data.action_horizon=32   # dotlist
#   DATA_PATH=/data/libero_lerobot EMBODIMENT_TAG=libero_panda NPROC_PER_NODE=4 bash run_groot_n1_6_ddp_finetune.sh
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

groot_launch "DDP" \
    --distributed-strategy ddp \
    --no-ddp-find-unused-parameters \
    -- "$@"
