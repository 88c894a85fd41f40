#!/usr/bin/env bash
# ============================================================================
# run_xvla_ddp_finetune.sh - X-VLA fine-tuning with DDP (every rank holds the full 0.9B model and optimizer;
# fits one 80 GB GPU in bf16 at the default batch).
#
# Usage:
#   bash run_xvla_ddp_finetune.sh
#   NPROC_PER_NODE=1 bash run_xvla_ddp_finetune.sh                        # the single-GPU fine-tune
#   ACTION_MODE=ee6d DOMAIN_ID=3 bash run_xvla_ddp_finetune.sh            # LIBERO with X-VLA's ee6d layout
#   bash run_xvla_ddp_finetune.sh --freeze-modules vlm                    # train the transformer and prompts only
#   bash run_xvla_ddp_finetune.sh model.gradient_checkpointing=true data.action_horizon=32   # dotlist
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

xvla_launch "DDP" \
    --distributed-strategy ddp \
    -- "$@"
