#!/usr/bin/env bash
# ============================================================================
# run_smolvla_fsdp_finetune.sh - SmolVLA fine-tuning with FSDP2 (parameters, gradients and optimizer sharded),
# for full fine-tuning (model.train_expert_only=false) on several GPUs.
#
# The FSDP units are SmolVLA's joint layers (VLM layer i + its expert layer, one module) and the vision encoder
# layers: SmolVLAModel.fsdp_units(). On several nodes, add --hsdp-shard-size auto for HSDP.
#
# Usage:
#   NPROC_PER_NODE=8 bash run_smolvla_fsdp_finetune.sh model.train_expert_only=false
#   WORLD_SIZE=2 RANK=0 MASTER_ADDR=10.0.0.1 NPROC_PER_NODE=8 bash run_smolvla_fsdp_finetune.sh --hsdp-shard-size auto
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

smolvla_launch "FSDP2" \
    --distributed-strategy fsdp \
    --fsdp-wrap-modules SmolVLALayer,SmolVLMEncoderLayer \
    -- "$@"
