#!/usr/bin/env bash
# Shared settings of the GR00T N1.6 fine-tuning recipes (sourced by run_groot_n1_6_*_finetune.sh).
# Every path and size is an environment variable with a default; edit nothing, export what differs.

# -- Paths --------------------------------------------------------------------
TOKENIZER_PATH=${TOKENIZER_PATH-"/workspace/eagle3-processor-groot-n1d6"}  # local Eagle3 processor folder (tokenizer,
                                                                         # chat template, processor configs)
CHECKPOINT_PATH=${CHECKPOINT_PATH-"/workspace/GR00T-N1.6-3B"}           # official GR00T N1.6 folder (or a
                                                                         # LoongForge checkpoint); empty: random init
DATA_PATH=${DATA_PATH:-"/workspace/my_robot_lerobot"}                    # LeRobot dataset
OUTPUT_DIR=${OUTPUT_DIR:-"/workspace/outputs/groot_n1_6"}
TENSORBOARD_PATH=${TENSORBOARD_PATH:-""}                                 # empty: no TensorBoard
EMBODIMENT_TAG=${EMBODIMENT_TAG:-"new_embodiment"}                       # a GR00T N1.6 tag (new_embodiment: slot 10)

export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}

source "$(dirname "${BASH_SOURCE[0]}")/../_recipe_common.sh"

# -- Model and data -------------------------------------------------------------
MODEL_NAME=${MODEL_NAME:-"groot_n1_6"}
MODEL_ARGS=(--model-name "$MODEL_NAME" --trainer-type groot_n1_6 "data.embodiment_tag=$EMBODIMENT_TAG")
if [[ -n "$TOKENIZER_PATH" ]]; then  # empty for groot_n1_6_tiny (built-in tiny processor)
    MODEL_ARGS+=(--tokenizer-path "$TOKENIZER_PATH")
fi
if [[ -n "$CHECKPOINT_PATH" ]]; then
    MODEL_ARGS+=(--pretrained-checkpoint "$CHECKPOINT_PATH")
fi
DATA_ARGS=(
    --dataset-format lerobot_datasets
    --dataset-path "$DATA_PATH"
    --dataset-strategy "${DATASET_STRATEGY:-default}"   # groot_n1_7 for datasets with GR00T's meta/modality.json
    --num-workers "${NUM_WORKERS:-8}"
)

# -- Training (LoongForge's N1.6 recipe: AdamW, peak LR 1e-4, weight decay 1e-5, cosine to 0, clip 1.0, bf16) ------
TRAIN_ITERS=${TRAIN_ITERS:-10000}
TRAINING_ARGS=(
    --train-iters "$TRAIN_ITERS"
    --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-16}"
    --gradient-accumulation-steps "${GRADIENT_ACCUMULATION_STEPS:-1}"
    --seed "${SEED:-1234}"
    --output-dir "$OUTPUT_DIR"
    --optimizer AdamW
    --lr-base "${LR:-1e-4}"
    --min-lr "${MIN_LR:-0}"
    --lr-decay-style cosine_with_min_lr
    --lr-warmup-iters "${WARMUP_ITERS:-$((TRAIN_ITERS / 20))}"
    --adam-beta1 0.9
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
    recipe_launch "GR00T N1.6" "$@"
}
