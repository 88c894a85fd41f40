#!/usr/bin/env bash
# GPU check of embodied-dist (< 10 minutes): NCCL parity of DDP / ZeRO-1 / FSDP2 against one process,
# peak CUDA memory per FSDP reshard policy, and sync vs async DCP save blocking time.
# Usage: bash benchmarks/gpu_dist_check.sh [OUT_DIR]   (from the repository root, venv active or in .venv)
# With one GPU the parity runs are single-process (NCCL needs one GPU per rank); with 2+ GPUs they use
# min(#GPUs, 4) processes. The JSON report is the line starting with GPU_DIST_REPORT.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-$(mktemp -d /tmp/gpu_dist_check.XXXX)}"
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python
mkdir -p "$OUT"
GPUS=$("$PY" -c "import torch; print(torch.cuda.device_count())")
if [ "$GPUS" -lt 1 ]; then echo "no CUDA device visible" >&2; exit 1; fi
NPROC=$(( GPUS >= 4 ? 4 : GPUS ))
echo "== $GPUS GPU(s); $NPROC process(es); output in $OUT"
timeout 200 "$PY" benchmarks/gpu_dist_check.py --phase reference --out "$OUT" > "$OUT/reference.log" 2>&1
timeout 360 "$PY" -m torch.distributed.run --standalone --nproc_per_node "$NPROC" \
    benchmarks/gpu_dist_check.py --phase main --out "$OUT" > "$OUT/main.log" 2>&1 || {
    tail -40 "$OUT/main.log"; exit 1; }
grep GPU_DIST_REPORT "$OUT/main.log"
