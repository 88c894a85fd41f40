#!/usr/bin/env bash
# ============================================================================
# run_groot_n1_6_lora_finetune.sh - GR00T N1.6 LoRA fine-tuning with DDP.
#
# Adapters on GrootN16Model.default_lora_targets(): the DiT blocks' attention (to_q/k/v/out) and FFN projections,
# plus the attention and MLP projections of the backbone layers that train (the top model.tune_top_llm_layers
# language layers; every layer with model.tune_llm=true, the SigLIP2 layers with model.tune_visual=true). The base
# weights are frozen; the embodiment-specific encoders and decoder train in full (--lora-modules-to-save).
#
# Usage:
#   bash run_groot_n1_6_lora_finetune.sh
#   LORA_R=32 LORA_ALPHA=64 bash run_groot_n1_6_lora_finetune.sh
# See _common.sh for every environment variable.
# ============================================================================
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

groot_launch "LoRA, DDP" \
    --distributed-strategy ddp \
    --no-ddp-find-unused-parameters \
    --use-lora \
    --lora-r "${LORA_R:-16}" \
    --lora-alpha "${LORA_ALPHA:-32}" \
    --lora-dropout "${LORA_DROPOUT:-0.0}" \
    --lora-modules-to-save "${LORA_MODULES_TO_SAVE:-action_head.state_encoder,action_head.action_encoder,action_head.action_decoder}" \
    -- "$@"
