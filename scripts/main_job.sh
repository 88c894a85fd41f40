#!/usr/bin/env bash
# The main job: a short real training run on CPU with the default small model.
# Extra arguments are passed to `embodied train` (flags or dotlist overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
OUTPUT_DIR="${OUTPUT_DIR:-outputs/main_job}"
exec .venv/bin/embodied train \
    --model-name tiny_flow_policy \
    --dataset-format dummy_datasets --num-samples 512 \
    --train-iters 300 --per-device-batch-size 16 \
    --lr-base 1e-3 --lr-warmup-iters 20 --min-lr 1e-5 \
    --dtype float32 --num-workers 2 --log-interval 25 --save-interval 100 \
    --output-dir "$OUTPUT_DIR" "$@"
