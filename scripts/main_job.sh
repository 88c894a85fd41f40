#!/usr/bin/env bash
# The main job: synthesize a small LeRobot v3.0 dataset (a point arm reaching a moving target, real H.264
# video) and fine-tune pi05_tiny on it on CPU for a few hundred steps; the loss falls clearly.
# State/action sizes and cameras come from the dataset's meta/info.json (logged, and saved in config.yaml).
# Extra arguments are passed to `embodied train` (flags or dotlist overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
DATASET_DIR="${DATASET_DIR:-outputs/synth_reach}"
OUTPUT_DIR="${OUTPUT_DIR:-outputs/main_job}"
if [ ! -f "$DATASET_DIR/meta/info.json" ]; then
    .venv/bin/embodied data synth "$DATASET_DIR" --episodes 24 --seed 0
fi
exec .venv/bin/embodied train \
    --model-name pi05_tiny \
    --dataset-format lerobot_datasets --dataset-path "$DATASET_DIR" \
    --train-iters 300 --per-device-batch-size 8 \
    --lr-base 1e-3 --lr-warmup-iters 20 --min-lr 1e-5 \
    --dtype float32 --num-workers 2 --log-interval 10 --save-interval 150 \
    --output-dir "$OUTPUT_DIR" "$@"
