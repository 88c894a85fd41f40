#!/usr/bin/env bash
# The MetaWorld job: a real benchmark task instead of the main job's toy. `embodied data collect` records 50
# successful episodes of MetaWorld's scripted expert on button-press-topdown-v3 (128 px frames in the fast look, a
# LeRobot v3.0 dataset with H.264 video), smolvla_tiny is fine-tuned on it on CPU, then `embodied eval --env
# metaworld` runs it for 50 seeded episodes (seeds 1000.., lerobot-eval's) next to the two baselines on the same
# seeds (hold: zero motion, gripper kept; the data's mean action) and prints the success rates
# (outputs/metaworld_job/eval/eval.json). Extra arguments are passed to `embodied train`.
# benchmarks/metaworld_benchmark.py runs the same with the expert's own rate, more models, multi-task and lerobot side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
TASK="${TASK:-button-press-topdown-v3}"
DATASET_DIR="${DATASET_DIR:-outputs/metaworld_${TASK}}"
OUTPUT_DIR="${OUTPUT_DIR:-outputs/metaworld_job}"
# resumable: an interrupted collection continues, a complete one is reused
.venv/bin/embodied data collect --env metaworld --task "$TASK" --episodes "${DEMOS:-50}" --policy expert \
    --image-size 128 --out "$DATASET_DIR"
# lerobot's SmolVLA optimizer preset (AdamW betas 0.9/0.95, weight decay 1e-10, clip 10), as benchmarks/metaworld_benchmark.py
.venv/bin/embodied train \
    --model-name smolvla_tiny \
    --dataset-format lerobot_datasets --dataset-path "$DATASET_DIR" \
    --train-iters "${TRAIN_ITERS:-1500}" --per-device-batch-size 16 \
    --lr-base 3e-3 --lr-warmup-iters 50 --min-lr 1e-5 \
    --adam-beta2 0.95 --weight-decay 1e-10 --clip-grad 10 \
    --dtype float32 --num-workers 2 --log-interval 50 --save-interval "${TRAIN_ITERS:-1500}" \
    --output-dir "$OUTPUT_DIR" "$@"
.venv/bin/embodied eval "$OUTPUT_DIR" --env metaworld --task "$TASK" --episodes "${EVAL_EPISODES:-50}" --seed 1000 \
    --replan-steps 5 --baselines hold,mean_action --num-envs 2 --output-dir "$OUTPUT_DIR/eval"
