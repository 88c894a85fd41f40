#!/usr/bin/env bash
# The main job: synthesize a small LeRobot v3.0 dataset (a point arm reaching a moving target, real H.264
# video), fine-tune smolvla_tiny on it on CPU, then close the loop: `embodied eval` runs the trained policy in
# the synth_reach simulator (the same task) for 50 episodes next to two baselines on the same seeds
# (hold still; the data's mean action) and prints the success rates (outputs/main_job/eval/eval.json).
# State/action sizes and cameras come from the dataset's meta/info.json (logged, and saved in config.yaml).
# Extra arguments are passed to `embodied train` (flags or dotlist overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
DATASET_DIR="${DATASET_DIR:-outputs/synth_reach}"
OUTPUT_DIR="${OUTPUT_DIR:-outputs/main_job}"
if [ ! -f "$DATASET_DIR/meta/info.json" ]; then
    .venv/bin/embodied data synth "$DATASET_DIR" --episodes 24 --seed 0
fi
# smolvla_tiny (the SmolVLA architecture at CPU size) reads the state through a linear projection; pi05_tiny, which
# reads it as binned text tokens, did not beat the baselines in this budget (README "The main job").
.venv/bin/embodied train \
    --model-name smolvla_tiny \
    --dataset-format lerobot_datasets --dataset-path "$DATASET_DIR" \
    --train-iters 1500 --per-device-batch-size 16 \
    --lr-base 3e-3 --lr-warmup-iters 50 --min-lr 1e-5 \
    --dtype float32 --num-workers 2 --log-interval 50 --save-interval 750 \
    --output-dir "$OUTPUT_DIR" "$@"
.venv/bin/embodied eval "$OUTPUT_DIR" --env synth_reach --episodes "${EVAL_EPISODES:-50}" --replan-steps 5 \
    --baselines hold,mean_action --num-envs 2 --output-dir "$OUTPUT_DIR/eval"
