#!/usr/bin/env bash
# What every model's fine-tuning recipe shares (sourced by examples/<model>/_common.sh): the distributed launch
# from the platform's environment and the banner + torchrun call.

# -- Distributed: the platform's env (WORLD_SIZE = nodes, RANK = node rank) ------------------------
NPROC_PER_NODE=${NPROC_PER_NODE:-8}
NNODES=${WORLD_SIZE:-1}
NODE_RANK=${RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-"localhost"}
MASTER_PORT=${MASTER_PORT:-29500}
DISTRIBUTED_ARGS=(
    --nproc_per_node "$NPROC_PER_NODE"
    --nnodes "$NNODES"
    --node_rank "$NODE_RANK"
    --master_addr "$MASTER_ADDR"
    --master_port "$MASTER_PORT"
)
# torchrun sets WORLD_SIZE/RANK per process itself; the node-level values above must not leak into it
unset WORLD_SIZE RANK

recipe_launch() {
    # $1: family name; $2: title; then the strategy flags; "--" separates the user's passthrough arguments.
    # Reads MODEL_ARGS, DATA_ARGS, TRAINING_ARGS and MODEL_SUMMARY (default: $MODEL_NAME) of the sourcing script.
    local family=$1 title=$2; shift 2
    local strategy=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do strategy+=("$1"); shift; done
    [[ "${1:-}" == "--" ]] && shift
    echo "========================================================================"
    echo "  embodied $family fine-tuning ($title)"
    echo "  Model:      ${MODEL_SUMMARY:-$MODEL_NAME}"
    echo "  Processes:  $NPROC_PER_NODE x $NNODES node(s) (this is node $NODE_RANK, master $MASTER_ADDR:$MASTER_PORT)"
    echo "  Data:       $DATA_PATH"
    echo "  Checkpoint: ${CHECKPOINT_PATH:-<random init>}"
    echo "  Output:     $OUTPUT_DIR"
    echo "========================================================================"
    exec torchrun "${DISTRIBUTED_ARGS[@]}" -m embodied_core.cli.main train \
        "${MODEL_ARGS[@]}" "${DATA_ARGS[@]}" "${TRAINING_ARGS[@]}" "${strategy[@]}" "$@"
}
