#!/usr/bin/env bash
# ============================================================================
# run_groot_n1_6_fsdp_finetune.sh - GR00T N1.6 fine-tuning with FSDP2 (parameters, gradients and optimizer
# sharded).
#
# The FSDP units are GrootN16Model.fsdp_units(): the DiT blocks (GrootBlock), the backbone's Qwen3 decoder layers
# and SigLIP2 encoder layers. On several nodes, add --hsdp-shard-size auto for HSDP (shard within a node,
# replicate across nodes).
#
# Usage:
#   bash run_groot_n1_6_fsdp_finetune.sh
#   WORLD_SIZE=2 RANK=0 MASTER_ADDR=10.0.0.1 bash run_groot_n1_6_fsdp_finetune.sh --hsdp-shard-size auto
#   bash run_groot_n1_6_fsdp_finetune.sh model.gradient_checkpointing=true model.tune_llm=true
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

groot_launch "FSDP2" \
    --distributed-strategy fsdp \
    --fsdp-wrap-modules GrootBlock,Qwen3DecoderLayer,Siglip2EncoderLayer \
    -- "$@"
