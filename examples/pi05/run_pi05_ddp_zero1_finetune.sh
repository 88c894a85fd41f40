#!/usr/bin/env bash
# ============================================================================
# run_pi05_ddp_zero1_finetune.sh - pi0.5 fine-tuning with DDP + ZeRO-1 (optimizer state sharded over ranks).
#
# Usage:
#   bash run_pi05_ddp_zero1_finetune.sh
#   bash run_pi05_ddp_zero1_finetune.sh --zero-master-param-dtype fp32   # bf16 params + fp32 master shards
#   bash run_pi05_ddp_zero1_finetune.sh model.gradient_checkpointing=true
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

pi05_launch "DDP + ZeRO-1" \
    --distributed-strategy ddp \
    --zero-optimizer \
    --no-ddp-find-unused-parameters \
    -- "$@"
