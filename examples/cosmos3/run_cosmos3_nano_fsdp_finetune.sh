#!/usr/bin/env bash
# ============================================================================
# run_cosmos3_nano_fsdp_finetune.sh - NVIDIA Cosmos3 action policy (cosmos3_nano, ~15.2B transformer + Wan2.2
# VAE encoder) fine-tuned on a DROID v3.0 LeRobot dataset with FSDP2.
#
# - --init-on-meta: the model is built on the meta device; FSDP shards it and only the local shards get storage
#   (a 15B model never exists whole in one process), then --pretrained-checkpoint streams into the shards.
# - FSDP units: the mixture-of-transformers decoder layers (Cosmos3VLTextMoTDecoderLayer, the model's
#   fsdp_units()); bf16 compute and gradient reduction.
# - Activation checkpointing of every decoder layer (model.gradient_checkpointing=true).
# - As LoongForge's recipe: the generation pathway trains (model.freeze_understanding in the preset), action heads
#   at LR 1e-3 and the rest at 2e-4, lambda_linear schedule, fused AdamW (0.9, 0.99), weight decay 0.05.
#
# CHECKPOINT_PATH: a LoongForge Cosmos3 DCP checkpoint (model/.metadata), a diffusers Cosmos3OmniTransformer
# folder, or an embodied checkpoint. VAE_PATH: a local diffusers AutoencoderKLWan folder (Wan2.2-TI2V-5B-Diffusers
# /vae); LoongForge's and diffusers' transformer checkpoints hold no VAE.
#
# Usage:
#   bash run_cosmos3_nano_fsdp_finetune.sh
#   WORLD_SIZE=2 RANK=0 MASTER_ADDR=10.0.0.1 bash run_cosmos3_nano_fsdp_finetune.sh --hsdp-shard-size auto
#   MODEL_NAME=cosmos3_tiny NPROC_PER_NODE=2 ... bash run_cosmos3_nano_fsdp_finetune.sh   (CPU smoke test: add
#   --dtype float32; gloo is picked without GPUs)
# ============================================================================
set -euo pipefail

TOKENIZER_PATH=${TOKENIZER_PATH:-"/workspace/models/Qwen3-VL-8B-Instruct"}   # tokenizer.json + chat template
VAE_PATH=${VAE_PATH-"/workspace/models/Wan2.2-TI2V-5B-Diffusers/vae"}          # empty: VAE from the checkpoint
CHECKPOINT_PATH=${CHECKPOINT_PATH-"/workspace/models/Cosmos3-Nano"}           # empty: random init
DATA_PATH=${DATA_PATH:-"/workspace/datasets/droid_lerobot_v30"}
OUTPUT_DIR=${OUTPUT_DIR:-"/workspace/outputs/cosmos3_nano"}

export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}

source "$(dirname "${BASH_SOURCE[0]}")/../_recipe_common.sh"

MODEL_NAME=${MODEL_NAME:-"cosmos3_nano"}
MODEL_ARGS=(--model-name "$MODEL_NAME" --tokenizer-path "$TOKENIZER_PATH" model.gradient_checkpointing=true)
if [[ -n "$VAE_PATH" ]]; then
    MODEL_ARGS+=("model.vae_path=$VAE_PATH")
fi
if [[ -n "$CHECKPOINT_PATH" ]]; then
    MODEL_ARGS+=(--pretrained-checkpoint "$CHECKPOINT_PATH")
fi
DATA_ARGS=(
    --dataset-format lerobot_datasets
    --dataset-strategy cosmos3_droid
    --dataset-path "$DATA_PATH"
    --num-workers "${NUM_WORKERS:-4}"
)
TRAINING_ARGS=(
    --init-on-meta
    --train-iters "${TRAIN_ITERS:-20}"
    --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-2}"
    --gradient-accumulation-steps "${GRADIENT_ACCUMULATION_STEPS:-1}"
    --seed "${SEED:-42}"
    --output-dir "$OUTPUT_DIR"
    --lr-group "net.action_proj_in=1e-3,net.action_proj_out=1e-3,net=2e-4"
    --lr-decay-style lambda_linear
    --lr-warmup-iters 0
    --optimizer TorchFusedAdamW
    --clip-grad 1.0
    --weight-decay 0.05
    --adam-beta1 0.9
    --adam-beta2 0.99
    --adam-eps 1e-8
    --save-interval "${SAVE_INTERVAL:-0}"
    --log-interval 1
    --dtype "${DTYPE:-bfloat16}"
)
MODEL_SUMMARY="$MODEL_NAME (checkpoint ${CHECKPOINT_PATH:-none}, VAE ${VAE_PATH:-from the checkpoint})"

recipe_launch "Cosmos3" "FSDP2, init on meta, activation checkpointing" \
    --distributed-strategy fsdp \
    --fsdp-wrap-modules Cosmos3VLTextMoTDecoderLayer \
    --fsdp-reduce-dtype bf16 \
    -- "$@"
