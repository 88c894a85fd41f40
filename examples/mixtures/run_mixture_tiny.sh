#!/usr/bin/env bash
# ============================================================================
# run_mixture_tiny.sh - train a tiny model (CPU) on a mixture of the shared datasets of four layouts.
#
# Usage:
#   bash examples/mixtures/run_mixture_tiny.sh                      # pi05_tiny on pi05_tiny_mix.yaml
#   bash examples/mixtures/run_mixture_tiny.sh groot_n1_7_tiny      # groot_n1_7_tiny on groot_n1_7_tiny_mix.yaml
#   TRAIN_ITERS=50 bash examples/mixtures/run_mixture_tiny.sh pi05_tiny --seed 7   # extra flags pass through
# The mixture is checked first (embodied data mixture: entries, measured shares, stats, every problem); training
# starts only when the check finds no problem. Environment: MIXTURE, OUTPUT_DIR, TRAIN_ITERS, NUM_WORKERS.
# ============================================================================
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODEL_NAME=${1:-pi05_tiny}
shift $(( $# > 0 ? 1 : 0 ))
MIXTURE=${MIXTURE:-"$HERE/${MODEL_NAME}_mix.yaml"}
OUTPUT_DIR=${OUTPUT_DIR:-"outputs/mixture_${MODEL_NAME}"}
# lingzu's state and actions have 34 dimensions: wider than the tiny presets' 32
OVERRIDES=(model.max_state_dim=64 model.max_action_dim=64)
if [[ "$MODEL_NAME" == pi05_tiny ]]; then
    OVERRIDES+=(model.max_token_len=256)  # the prompt carries the 64 state bins
fi

embodied data mixture "$MIXTURE" --model-name "$MODEL_NAME" --video-backend pyav \
    --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-8}" "${OVERRIDES[@]}"

embodied train --model-name "$MODEL_NAME" --dataset-mixture "$MIXTURE" --video-backend pyav \
    --train-iters "${TRAIN_ITERS:-200}" --per-device-batch-size "${PER_DEVICE_BATCH_SIZE:-8}" \
    --num-workers "${NUM_WORKERS:-2}" --dtype float32 --lr-base 1e-3 --lr-warmup-iters 20 \
    --save-interval "${TRAIN_ITERS:-200}" --log-interval 10 --output-dir "$OUTPUT_DIR" \
    "${OVERRIDES[@]}" "$@"
