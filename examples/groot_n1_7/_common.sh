#!/usr/bin/env bash
# Shared settings of the GR00T N1.7 fine-tuning recipes (sourced by run_groot_n1_7_*_finetune.sh).
# Every path and size is an environment variable with a default; edit nothing, export what differs.

# -- Paths --------------------------------------------------------------------
TOKENIZER_PATH=${TOKENIZER_PATH-"/workspace/Cosmos-Reason2-2B"}      # local Qwen3-VL processor folder (tokenizer,
                                                                     # chat template, preprocessor_config.json)
CHECKPOINT_PATH=${CHECKPOINT_PATH-"/workspace/GR00T-N1.7-3B"}       # official GR00T N1.7 folder (or a lerobot
                                                                     # GrootPolicy folder); empty: random init
DATA_PATH=${DATA_PATH:-"/workspace/my_robot_lerobot"}                # LeRobot dataset with meta/modality.json
OUTPUT_DIR=${OUTPUT_DIR:-"/workspace/outputs/groot_n1_7"}
TENSORBOARD_PATH=${TENSORBOARD_PATH:-""}                             # empty: no TensorBoard
EMBODIMENT_TAG=${EMBODIMENT_TAG:-"new_embodiment"}                   # a GR00T tag (new_embodiment: slot 10)

export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}

source "$(dirname "${BASH_SOURCE[0]}")/../_recipe_common.sh"

# -- Model and data -------------------------------------------------------------
MODEL_NAME=${MODEL_NAME:-"groot_n1_7"}
MODEL_ARGS=(--model-name "$MODEL_NAME" --trainer-type groot_n1_7 "data.embodiment_tag=$EMBODIMENT_TAG")
if [[ -n "$TOKENIZER_PATH" ]]; then  # empty for groot_n1_7_tiny (built-in tiny processor)
    MODEL_ARGS+=(--tokenizer-path "$TOKENIZER_PATH")
fi
if [[ -n "$CHECKPOINT_PATH" ]]; then
    MODEL_ARGS+=(--pretrained-checkpoint "$CHECKPOINT_PATH")
fi
DATA_ARGS=(
    --dataset-format lerobot_datasets
    --dataset-path "$DATA_PATH"
    --dataset-strategy "${DATASET_STRATEGY:-groot_n1_7}"
    --num-workers "${NUM_WORKERS:-8}"
)

# -- Training (Isaac-GR00T fine-tuning defaults: AdamW, peak LR 1e-4, weight decay 1e-5, cosine, 5% warmup) ---
TRAIN_ITERS=${TRAIN_ITERS:-10000}
TRAINING_ARGS=(
    --train-iters "$TRAIN_ITERS"
    --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-8}"
    --gradient-accumulation-steps "${GRADIENT_ACCUMULATION_STEPS:-1}"
    --seed "${SEED:-42}"
    --output-dir "$OUTPUT_DIR"
    --optimizer AdamW
    --lr-base "${LR:-1e-4}"
    --min-lr "${MIN_LR:-0}"
    --lr-decay-style cosine_with_min_lr
    --lr-warmup-iters "${WARMUP_ITERS:-$((TRAIN_ITERS / 20))}"
    --adam-beta1 0.95
    --adam-beta2 0.999
    --adam-eps 1e-8
    --weight-decay 1e-5
    --weight-decay-grouping bias_norm
    --clip-grad 1.0
    --save-interval "${SAVE_INTERVAL:-1000}"
    --log-interval 10
    --dtype bfloat16
)
if [[ -n "$TENSORBOARD_PATH" ]]; then
    TRAINING_ARGS+=(--tensorboard-dir "$TENSORBOARD_PATH")
fi

MODEL_SUMMARY="$MODEL_NAME (embodiment $EMBODIMENT_TAG)"
groot_launch() {  # $1: title; then the strategy flags; "--" then the user's arguments
    recipe_launch "GR00T N1.7" "$@"
}
