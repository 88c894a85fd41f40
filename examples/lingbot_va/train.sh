#!/usr/bin/env bash
# ============================================================================
# train.sh - LingBot-VA post-training on a LeRobot v2.1 dataset, 1 node or N nodes, FSDP2 / HSDP.
#
# Driven by environment variables only (defaults in brackets):
#   CODE_DIR          embodied checkout; its .venv is used when present   [this script's repository]
#   DATASET_PATH      LeRobot v2.1 dataset                                  [required]
#   BASE_MODEL_PATH   folder with transformer/ vae/ text_encoder/ tokenizer/ (lingbot-va-base)   [required]
#   LOG_DIR, RUN_TAG  log file ${LOG_DIR}/${RUN_TAG}_$(hostname).log         [${SAVE_ROOT}/logs, lingbot_va]
#   NPROC_PER_NODE    processes (GPUs) per node                             [8]
#   WORLD_SIZE, RANK  number of nodes and this node's rank                  [1, 0]
#   MASTER_ADDR, MASTER_PORT                                                [localhost, 29700]
#   NUM_STEPS, SAVE_INTERVAL, GRADIENT_ACCUMULATION_STEPS                   [5000, 200, 1]
#   SAVE_ROOT         runs go to ${SAVE_ROOT}/${RUN_TAG}                     [./outputs]
#   RESUME_FROM       a checkpoint dir (…/checkpoints/step_N) to continue from   [none]
#   RESUME_OPTIMIZER  restore (ours: AdamW moments continue) | rebuild (the image's behaviour: fresh moments;
#                     weights, step and LR schedule still continue, no re-warmup)   [restore]
#   MODEL_NAME        lingbot_va_libero | lingbot_va_robotwin | lingbot_va_tiny      [lingbot_va_libero]
#   PRETRAINED_LAYOUT lingbot_va (lingbot-va-base transformer/) | wan22 (raw Wan2.2-TI2V-5B)   [lingbot_va]
#   PER_DEVICE_BATCH_SIZE, LR, WARMUP_STEPS, NUM_WORKERS, DEVICE_TYPE (cuda|cpu)    [1, 1e-5, 10, 4, auto]
#   PRECOMPUTE        1: build the latent cache first (each node encodes its share)   [0]
#   INIT_ON_META      1: build on the meta device, shard, materialize only this rank's shards (see below)   [1]
#   TORCHRUN          the launcher command (e.g. a site wrapper around torchrun)   [torchrun: the .venv's first]
# Extra arguments are passed to `embodied train` (flags or model.x=... / data.y=...).
#
# Parallelism (what we chose and why):
# - FSDP2 with one unit per transformer block (LingBotBlock) plus the root: a 5B model in fp32 master weights
#   and AdamW moments (~80 GB) does not fit one GPU; per-block units overlap each block's all-gather with the
#   previous block's compute.
# - Reshard after forward is OFF for the blocks (--fsdp-reshard-default false): backward reuses the gathered
#   parameters instead of all-gathering them again (one all-gather per block per micro-batch instead of two), at
#   the cost of holding a micro-batch's unsharded block parameters (~10 GB in bf16 for 5B) until its backward.
# - Gradient accumulation: with --fsdp-reduce-every-microbatch (the default here) gradients are reduce-scattered
#   after every micro-batch and only sharded gradients are kept (memory as GA=1). Set
#   FSDP_REDUCE_EVERY_MICROBATCH=0 to reduce once per step: less communication, but every rank keeps the
#   unsharded fp32 gradients of the whole model between micro-batches (~20 GB more for 5B), the memory step
#   between GA=1 and GA>=2.
# - WORLD_SIZE > 1 nodes: HSDP with shard size = GPUs per node (--hsdp-shard-size auto): parameters are
#   sharded inside a node (fast NVLink all-gathers) and replicated across nodes (only gradients cross nodes).
# - bf16 compute (--dtype bfloat16), fp32 master parameters and fp32 gradient reduction (--fsdp-reduce-dtype
#   fp32): bf16 reductions over many ranks lose small gradient contributions.
# - --init-on-meta: each rank builds the 5B model on the meta device (no memory), FSDP shards it, only the rank's
#   shards are materialized on its GPU, and the transformer/ folder is streamed in a tensor at a time
#   (--pretrained-checkpoint; a resume reads the checkpoint the same way). Without it every rank built the model
#   in fp32 on the host first: ~20 GB per rank, ~160 GB per 8-GPU node.
# ============================================================================
set -euo pipefail

CODE_DIR=${CODE_DIR:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"}
cd "$CODE_DIR"
if [[ -x "$CODE_DIR/.venv/bin/torchrun" ]]; then PATH="$CODE_DIR/.venv/bin:$PATH"; fi
TORCHRUN=${TORCHRUN:-torchrun}

: "${DATASET_PATH:?set DATASET_PATH to a LeRobot v2.1 dataset}"
: "${BASE_MODEL_PATH:?set BASE_MODEL_PATH to a folder with transformer/ vae/ text_encoder/ tokenizer/}"
RUN_TAG=${RUN_TAG:-lingbot_va}
SAVE_ROOT=${SAVE_ROOT:-"$CODE_DIR/outputs"}
LOG_DIR=${LOG_DIR:-"$SAVE_ROOT/logs"}
NPROC_PER_NODE=${NPROC_PER_NODE:-8}
NNODES=${WORLD_SIZE:-1}
NODE_RANK=${RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-29700}
NUM_STEPS=${NUM_STEPS:-5000}
SAVE_INTERVAL=${SAVE_INTERVAL:-200}
GRADIENT_ACCUMULATION_STEPS=${GRADIENT_ACCUMULATION_STEPS:-1}
RESUME_FROM=${RESUME_FROM:-}
RESUME_OPTIMIZER=${RESUME_OPTIMIZER:-restore}
MODEL_NAME=${MODEL_NAME:-lingbot_va_libero}
PRETRAINED_LAYOUT=${PRETRAINED_LAYOUT:-lingbot_va}
OUTPUT_DIR="$SAVE_ROOT/$RUN_TAG"
# torchrun sets WORLD_SIZE/RANK per process; the node-level values above must not leak into it.
unset WORLD_SIZE RANK

mkdir -p "$LOG_DIR" "$OUTPUT_DIR"
LOG_FILE="$LOG_DIR/${RUN_TAG}_$(hostname).log"
exec > >(tee -a "$LOG_FILE") 2>&1

if [[ "$NNODES" -gt 1 ]]; then TOPOLOGY="HSDP (replicate ${NNODES} x shard ${NPROC_PER_NODE})"
else TOPOLOGY="FSDP2 (shard ${NPROC_PER_NODE})"; fi
echo "TOPOLOGY nodes=${NNODES} node_rank=${NODE_RANK} procs_per_node=${NPROC_PER_NODE}" \
     "world=$((NNODES * NPROC_PER_NODE)) mode=${TOPOLOGY} master=${MASTER_ADDR}:${MASTER_PORT}" \
     "ga=${GRADIENT_ACCUMULATION_STEPS} host=$(hostname) model=${MODEL_NAME}"

DISTRIBUTED_ARGS=(--nproc_per_node "$NPROC_PER_NODE" --nnodes "$NNODES" --node_rank "$NODE_RANK"
                  --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT")

if [[ "${PRECOMPUTE:-0}" == "1" ]]; then
    "$TORCHRUN" "${DISTRIBUTED_ARGS[@]}" -m embodied_models.lingbot_va.precompute "$DATASET_PATH" \
        --base-model-path "$BASE_MODEL_PATH" --model-name "$MODEL_NAME"
fi

TRAIN_ARGS=(
    --model-name "$MODEL_NAME"
    --dataset-format lerobot_datasets --dataset-path "$DATASET_PATH" --lerobotdataset-version v2.1
    --dataset-strategy lingbot_va --trainer-type lingbot_va
    --num-workers "${NUM_WORKERS:-4}"
    --train-iters "$NUM_STEPS" --save-interval "$SAVE_INTERVAL"
    --gradient-accumulation-steps "$GRADIENT_ACCUMULATION_STEPS"
    --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-1}"
    --output-dir "$OUTPUT_DIR"
    --optimizer AdamW --lr-base "${LR:-1e-5}" --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8
    --weight-decay 0.1 --clip-grad 1.0
    --lr-decay-style constant_with_warmup --lr-warmup-iters "${WARMUP_STEPS:-10}"
    --log-interval 1 --detail-log-interval 1
    --dtype bfloat16
    --distributed-strategy fsdp --fsdp-wrap-modules LingBotBlock
    --fsdp-reshard-default false --fsdp-reduce-dtype fp32
    model.export_transformer=true
)
if [[ "${FSDP_REDUCE_EVERY_MICROBATCH:-1}" == "0" ]]; then TRAIN_ARGS+=(--no-fsdp-reduce-every-microbatch); fi
if [[ "$NNODES" -gt 1 ]]; then TRAIN_ARGS+=(--hsdp-shard-size auto); fi
if [[ -d "$BASE_MODEL_PATH/transformer" && "${INIT_ON_META:-1}" == "1" ]]; then
    TRAIN_ARGS+=(--init-on-meta --pretrained-checkpoint "$BASE_MODEL_PATH/transformer"
                 "model.pretrained_layout=$PRETRAINED_LAYOUT")
elif [[ -d "$BASE_MODEL_PATH/transformer" ]]; then
    TRAIN_ARGS+=("model.pretrained_path=$BASE_MODEL_PATH/transformer" "model.pretrained_layout=$PRETRAINED_LAYOUT")
elif [[ "${INIT_ON_META:-1}" == "1" ]]; then
    TRAIN_ARGS+=(--init-on-meta)
fi
if [[ -n "$RESUME_FROM" ]]; then
    TRAIN_ARGS+=(--resume-from "$RESUME_FROM")
    TRAIN_ARGS+=("model.resume_optimizer=$RESUME_OPTIMIZER")
fi

exec "$TORCHRUN" "${DISTRIBUTED_ARGS[@]}" -m embodied_core.cli.main train "${TRAIN_ARGS[@]}" "$@"
