#!/usr/bin/env bash
# Shared settings of the DreamZero fine-tuning recipes (sourced by run_dreamzero_*_fsdp_finetune.sh), from
# LoongForge's examples/embodied/dreamzero/run_dreamzero_*_fsdp_finetune.sh. Export what differs; edit nothing.

# -- Paths --------------------------------------------------------------------
DATA_PATH=${DATA_PATH:-"/workspace/dreamzero/droid_lerobot"}        # LeRobot v2.x + GR00T meta/modality.json
TOKENIZER_PATH=${TOKENIZER_PATH:-"/workspace/dreamzero/umt5-xxl"}  # local UMT5 tokenizer (tokenizer.json)
WAN_DIR=${WAN_DIR-"/workspace/Wan2.2-TI2V-5B-Diffusers"}            # diffusers Wan release: transformer/ vae/ text_encoder/ (image_encoder/)
IMAGE_ENCODER_DIR=${IMAGE_ENCODER_DIR-"/workspace/Wan2.1-I2V-14B-480P-Diffusers/image_encoder"}  # CLIP ViT-H/14 (both backbones)
CACHE_DIR=${CACHE_DIR:-}                                             # embodied data precompute-dreamzero output; empty: encode online
OUTPUT_DIR=${OUTPUT_DIR:-"/workspace/outputs/dreamzero"}
TENSORBOARD_PATH=${TENSORBOARD_PATH:-""}

export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}

source "$(dirname "${BASH_SOURCE[0]}")/../_recipe_common.sh"

# -- Model: the Wan DiT from the release, frozen encoders from their folders ---------------------------------
MODEL_ARGS=(--model-name "$MODEL_NAME" --tokenizer-path "$TOKENIZER_PATH")
SECTION_ARGS=()
if [[ -n "$WAN_DIR" ]]; then
    MODEL_ARGS+=(--pretrained-checkpoint "$WAN_DIR/transformer")
    SECTION_ARGS+=("model.pretrained_layout=diffusers" "model.vae_path=$WAN_DIR/vae"
                   "model.text_encoder_path=$WAN_DIR/text_encoder")
fi
if [[ -n "$IMAGE_ENCODER_DIR" ]]; then
    SECTION_ARGS+=("model.image_encoder_path=$IMAGE_ENCODER_DIR")
fi
if [[ -n "$CACHE_DIR" ]]; then  # cached video latents + prompt embeddings (the image encoder still runs online)
    SECTION_ARGS+=("data.precomputed_cache_dir=$CACHE_DIR" "data.use_sample_transform_seed=true"
                   "data.sample_transform_seed=${SAMPLE_TRANSFORM_SEED:-0}")
fi
DATA_ARGS=(
    --dataset-format lerobot_datasets
    --dataset-strategy dreamzero
    --dataset-path "$DATA_PATH"
    --num-workers "${NUM_WORKERS:-4}"
)

# -- Training (LoongForge's recipe: AdamW 0.95/0.999, LR 1e-5 cosine to 0, warmup 5%, clip 1, bf16) ----------
TRAIN_ITERS=${TRAIN_ITERS:-20}
TRAINING_ARGS=(
    --train-iters "$TRAIN_ITERS"
    --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-1}"
    --gradient-accumulation-steps "${GRADIENT_ACCUMULATION_STEPS:-1}"
    --seed "${SEED:-42}"
    --output-dir "$OUTPUT_DIR"
    --optimizer AdamW
    --lr-base "${LR:-1e-5}"
    --min-lr 0
    --lr-decay-style cosine_with_min_lr
    --lr-warmup-iters "${WARMUP_ITERS:-$(((TRAIN_ITERS + 19) / 20))}"
    --adam-beta1 0.95
    --adam-beta2 0.999
    --adam-eps 1e-8
    --weight-decay 1e-5
    --weight-decay-grouping bias_norm
    --clip-grad 1.0
    --save-interval "${SAVE_INTERVAL:-0}"
    --log-interval "${LOG_INTERVAL:-1}"
    --dtype "${DTYPE:-bfloat16}"
)
if [[ -n "$TENSORBOARD_PATH" ]]; then
    TRAINING_ARGS+=(--tensorboard-dir "$TENSORBOARD_PATH")
fi

# -- FSDP2: one unit per DiT block (DreamZeroModel.fsdp_units), fp32 masters, bf16 reductions ------------------
FSDP_ARGS=(
    --distributed-strategy fsdp
    --fsdp-original-param-dtype fp32
    --fsdp-reduce-dtype "${FSDP_REDUCE_DTYPE:-bf16}"
    --fsdp-forward-prefetch-distance 1
    --fsdp-backward-prefetch-distance 1
)
# Activation checkpointing of the DiT blocks; AC_SKIP leaves some out (LoongForge: blocks 3 and 29 for 5B LoRA)
AC_ARGS=()
if [[ -n "${AC_PATTERNS-dit.blocks.*}" ]]; then
    AC_ARGS+=(--activation-checkpoint-module-patterns "${AC_PATTERNS-dit.blocks.*}")
    if [[ -n "${AC_SKIP:-}" ]]; then
        AC_ARGS+=(--activation-checkpoint-skip-modules "$AC_SKIP")
    fi
fi

MODEL_SUMMARY="$MODEL_NAME (Wan: ${WAN_DIR:-<random init>}, cache: ${CACHE_DIR:-online encoders})"
dreamzero_launch() {  # $1: title; then the recipe's own flags; "--" then the user's arguments
    local title=$1; shift
    local own=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do own+=("$1"); shift; done
    [[ "${1:-}" == "--" ]] && shift
    CHECKPOINT_PATH=${WAN_DIR:+$WAN_DIR/transformer}
    recipe_launch "DreamZero" "$title" "${FSDP_ARGS[@]}" "${AC_ARGS[@]}" "${own[@]}" "${SECTION_ARGS[@]}" -- "$@"
}
