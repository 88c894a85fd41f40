#!/usr/bin/env bash
# Shared settings of the pi0.5 fine-tuning recipes (sourced by run_pi05_*_finetune.sh).
# Every path and size is an environment variable with a default; edit nothing, export what differs.

# -- Paths --------------------------------------------------------------------
TOKENIZER_PATH=${TOKENIZER_PATH-"/workspace/paligemma-3b-pt-224"}   # local PaliGemma tokenizer directory
CHECKPOINT_PATH=${CHECKPOINT_PATH-"/workspace/pi05_base"}          # lerobot/openpi-PyTorch pi0.5 weights; empty: random init
DATA_PATH=${DATA_PATH:-"/workspace/libero"}                          # LeRobot dataset (v2.0/v2.1/v3.0)
OUTPUT_DIR=${OUTPUT_DIR:-"/workspace/outputs/pi05"}
TENSORBOARD_PATH=${TENSORBOARD_PATH:-""}                             # empty: no TensorBoard

export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}

source "$(dirname "${BASH_SOURCE[0]}")/../_recipe_common.sh"

# -- Model and data -------------------------------------------------------------
MODEL_NAME=${MODEL_NAME:-"pi05"}
MODEL_ARGS=(--model-name "$MODEL_NAME")
if [[ -n "$TOKENIZER_PATH" ]]; then  # empty for pi05_tiny (built-in tokenizer)
    MODEL_ARGS+=(--tokenizer-path "$TOKENIZER_PATH")
fi
if [[ -n "$CHECKPOINT_PATH" ]]; then
    MODEL_ARGS+=(--pretrained-checkpoint "$CHECKPOINT_PATH")
fi
DATA_ARGS=(
    --dataset-format lerobot_datasets
    --dataset-path "$DATA_PATH"
    --num-workers "${NUM_WORKERS:-8}"
)

# -- Training (openpi pi05 fine-tuning defaults: AdamW b2 0.95, peak LR 2.5e-5, cosine) ----------
TRAINING_ARGS=(
    --train-iters "${TRAIN_ITERS:-30000}"
    --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-4}"
    --gradient-accumulation-steps "${GRADIENT_ACCUMULATION_STEPS:-1}"
    --seed "${SEED:-42}"
    --output-dir "$OUTPUT_DIR"
    --optimizer AdamW
    --lr-base "${LR:-2.5e-5}"
    --min-lr "${MIN_LR:-2.5e-6}"
    --lr-decay-style cosine_with_min_lr
    --lr-warmup-iters "${WARMUP_ITERS:-1000}"
    --adam-beta1 0.9
    --adam-beta2 0.95
    --adam-eps 1e-8
    --weight-decay 1e-10
    --clip-grad 1.0
    --save-interval "${SAVE_INTERVAL:-5000}"
    --log-interval 10
    --dtype bfloat16
)
if [[ -n "$TENSORBOARD_PATH" ]]; then
    TRAINING_ARGS+=(--tensorboard-dir "$TENSORBOARD_PATH")
fi

pi05_launch() {  # $1: title; then the strategy flags; "--" then the user's arguments
    recipe_launch "pi0.5" "$@"
}
