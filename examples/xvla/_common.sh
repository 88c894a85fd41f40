#!/usr/bin/env bash
# Shared settings of the X-VLA fine-tuning recipes (sourced by run_xvla_*_finetune.sh).
# Every path and size is an environment variable with a default; edit nothing, export what differs.

# -- Paths --------------------------------------------------------------------
TOKENIZER_PATH=${TOKENIZER_PATH-"/workspace/bart-large"}           # local BART tokenizer (facebook/bart-large); empty for xvla_tiny
CHECKPOINT_PATH=${CHECKPOINT_PATH-"/workspace/X-VLA-0.9B"}         # 2toINF X-VLA or lerobot xvla-* weights; empty: random init
DATA_PATH=${DATA_PATH:-"/workspace/libero"}                          # LeRobot dataset (v2.0/v2.1/v3.0)
OUTPUT_DIR=${OUTPUT_DIR:-"/workspace/outputs/xvla"}
TENSORBOARD_PATH=${TENSORBOARD_PATH:-""}                             # empty: no TensorBoard

export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}

source "$(dirname "${BASH_SOURCE[0]}")/../_recipe_common.sh"

# -- Model and data -------------------------------------------------------------
MODEL_NAME=${MODEL_NAME:-"xvla"}
ACTION_MODE=${ACTION_MODE:-"auto"}       # ee6d / joint / agibot_ee6d / franka_joint7 / so101_bimanual / auto
DOMAIN_ID=${DOMAIN_ID:-0}                # the embodiment's soft prompts (X-VLA-0.9B: 0 Bridge, 3 LIBERO, 6 RoboTwin 2.0, ...)
MODEL_ARGS=(--model-name "$MODEL_NAME")
if [[ -n "$TOKENIZER_PATH" ]]; then
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
SECTION_ARGS=("model.action_mode=$ACTION_MODE" "data.domain_id=$DOMAIN_ID")

# -- Training (lerobot XVLAConfig presets: AdamW b2 0.99, LR 1e-4 with the VLM at 1/10, cosine to 2.5e-6) ---
LR=${LR:-1e-4}
VLM_LR=${VLM_LR:-1e-5}                   # X-VLA trains Florence-2 at 1/10 of LR; keep the ratio when changing LR
TRAINING_ARGS=(
    --train-iters "${TRAIN_ITERS:-30000}"
    --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-8}"
    --gradient-accumulation-steps "${GRADIENT_ACCUMULATION_STEPS:-1}"
    --seed "${SEED:-42}"
    --output-dir "$OUTPUT_DIR"
    --optimizer AdamW
    --lr-base "$LR"
    --lr-group "vlm=$VLM_LR"
    --min-lr "${MIN_LR:-2.5e-6}"
    --lr-decay-style cosine_with_min_lr
    --lr-warmup-iters "${WARMUP_ITERS:-1000}"
    --adam-beta1 0.9
    --adam-beta2 0.99
    --adam-eps 1e-8
    --weight-decay 0.0
    --clip-grad "${CLIP_GRAD:-10.0}"
    --save-interval "${SAVE_INTERVAL:-5000}"
    --log-interval "${LOG_INTERVAL:-10}"
    --dtype "${DTYPE:-bfloat16}"
)
if [[ -n "$TENSORBOARD_PATH" ]]; then
    TRAINING_ARGS+=(--tensorboard-dir "$TENSORBOARD_PATH")
fi

MODEL_SUMMARY="$MODEL_NAME (action_mode $ACTION_MODE, domain $DOMAIN_ID)"
xvla_launch() {  # $1: title; then the strategy flags; "--" then the user's arguments
    recipe_launch "X-VLA" "$@"
}
