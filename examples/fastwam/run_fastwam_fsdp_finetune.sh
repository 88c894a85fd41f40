#!/usr/bin/env bash
# ============================================================================
# run_fastwam_fsdp_finetune.sh - FastWAM (6B: Wan2.2-TI2V-5B video DiT + 1B action DiT) fine-tuning with FSDP2.
#
# Parallelism (what we chose and why):
# - FSDP2 with one unit per MoT layer (MoTLayer: the video block and the action block of a layer, which share one
#   joint attention; FastWAMModel.fsdp_units()) plus the root (embedders, heads, proprio encoder): 6B parameters
#   with fp32 master weights and AdamW moments (~96 GB) do not fit one GPU; per-layer units overlap each layer's
#   all-gather with the previous layer's compute.
# - bf16 compute (--dtype bfloat16) with fp32 master parameters and fp32 gradient reduction (--fsdp-reduce-dtype
#   fp32). The frozen Wan VAE is no sub-module: it is not sharded and runs in model.vae_dtype on every rank.
# - Gradient accumulation (GRADIENT_ACCUMULATION_STEPS > 1): with FSDP_REDUCE_EVERY_MICROBATCH=1 (default) the
#   gradients are reduce-scattered after every micro-batch and only sharded gradients are kept (memory as GA=1);
#   FSDP_REDUCE_EVERY_MICROBATCH=0 reduces once per step (less communication) but keeps the unsharded fp32
#   gradients of the whole model between micro-batches (~24 GB more per rank for 6B).
# - ACTIVATION_CHECKPOINTING=1 (default) recomputes every MoT layer in backward (model.gradient_checkpointing).
# - On several nodes, add --hsdp-shard-size auto (shard within a node, replicate across nodes).
#
# Environment (defaults in brackets):
#   DATA_PATH            LeRobot v2.1 / v3.0 dataset                                   [required]
#   TEXT_CACHE           UMT5 text cache of its prompts (README: precompute steps)   [required]
#   BASE_MODEL_PATH      Wan2.2-TI2V-5B-Diffusers folder (vae/, transformer/)          [required]
#   ACTION_DIT_PATH      embodied checkpoint init-fastwam-action-dit output            [none: random action DiT]
#   CHECKPOINT_PATH      a FastWAM checkpoint (lerobot / LoongForge / ours) instead of the two above   [none]
#   OUTPUT_DIR, NUM_STEPS, SAVE_INTERVAL, PER_DEVICE_BATCH_SIZE, GRADIENT_ACCUMULATION_STEPS, LR   [outputs/fastwam,
#                        20000, 1000, 4, 1, 1e-4]
#   VARIANT              uncond | base | joint | idm (model.variant)                        [uncond]
#   ACTIVATION_CHECKPOINTING, FSDP_REDUCE_EVERY_MICROBATCH   (see above)                 [1, 1]
#   NPROC_PER_NODE, WORLD_SIZE (nodes), RANK (node rank), MASTER_ADDR, MASTER_PORT   (see ../_recipe_common.sh)
# Extra arguments go to `embodied train` (flags or model.x=... / data.y=...).
# ============================================================================
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/../_recipe_common.sh"

: "${DATA_PATH:?set DATA_PATH to a LeRobot dataset}"
: "${TEXT_CACHE:?set TEXT_CACHE to the folder embodied data precompute-text wrote}"
: "${BASE_MODEL_PATH:?set BASE_MODEL_PATH to Wan2.2-TI2V-5B-Diffusers (vae/, transformer/)}"
MODEL_NAME=fastwam
OUTPUT_DIR=${OUTPUT_DIR:-outputs/fastwam}
GA=${GRADIENT_ACCUMULATION_STEPS:-1}
REDUCE_FLAG=--fsdp-reduce-every-microbatch
[[ "${FSDP_REDUCE_EVERY_MICROBATCH:-1}" == "0" ]] && REDUCE_FLAG=--no-fsdp-reduce-every-microbatch

MODEL_ARGS=(--model-name "$MODEL_NAME" "model.vae_path=$BASE_MODEL_PATH/vae" "model.vae_dtype=bfloat16"
            "model.gradient_checkpointing=$([[ "${ACTIVATION_CHECKPOINTING:-1}" == "1" ]] && echo true || echo false)")
if [[ -n "${CHECKPOINT_PATH:-}" ]]; then
    MODEL_ARGS+=(--pretrained-checkpoint "$CHECKPOINT_PATH")
else
    MODEL_ARGS+=("model.video_pretrained_path=$BASE_MODEL_PATH/transformer")
    [[ -n "${ACTION_DIT_PATH:-}" ]] && MODEL_ARGS+=("model.action_pretrained_path=$ACTION_DIT_PATH")
fi
[[ -n "${VARIANT:-}" ]] && MODEL_ARGS+=("model.variant=$VARIANT")
DATA_ARGS=(--dataset-path "$DATA_PATH" --dataset-strategy fastwam "data.text_cache_dir=$TEXT_CACHE")
TRAINING_ARGS=(--output-dir "$OUTPUT_DIR" --train-iters "${NUM_STEPS:-20000}" --save-interval "${SAVE_INTERVAL:-1000}"
               --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-4}" --gradient-accumulation-steps "$GA"
               --lr-base "${LR:-1e-4}" --dtype bfloat16 --fsdp-reduce-dtype fp32 "$REDUCE_FLAG")
MODEL_SUMMARY="fastwam (video DiT 5.0B + action DiT 1.0B, variant ${VARIANT:-uncond})"

recipe_launch fastwam "FSDP2, MoT layers as units" \
    --distributed-strategy fsdp \
    --fsdp-wrap-modules MoTLayer \
    -- "$@"
