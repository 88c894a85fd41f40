#!/usr/bin/env bash
# GPU acceptance run (issues 19, 29): one script, meant to finish in under 8 minutes on one H200-class GPU, that prints
# one table:
#   - every model lerobot 0.6.1 also ships (pi05, smolvla, xvla, groot_n1_7, fastwam, lingbot_va), bf16 autocast:
#     the training step of ours eager, ours --compile and lerobot's module on the same GPU, weights, inputs, noise
#     and time (benchmarks/vs_lerobot.py: time ratio, loss difference, peak memory, MFU); pi05 at the released size
#     (PaliGemma 2B + 300M expert, PI05_BATCH), the others at their mid size with batch GPU_BATCH;
#   - lingbot_va at a mid size (1536 wide x 12 layers, 8 latent frames) under FSDP2 on one rank: one unit per
#     block vs one per Linear, eager vs --compile, flex vs sdpa attention (benchmarks/lingbot_va_granularity.py).
# MFU: FLOPs of one step counted by torch's FlopCounterMode (vs_lerobot.py) or per token (lingbot_va_granularity.py,
# its doc says what is counted) over the GPU's bf16 dense peak (PEAK_TFLOPS, default 989: H200). Each vs_lerobot run
# is bounded by MODEL_TIMEOUT seconds (default 150); a model that fails or runs out of time is a row saying so.
#
# Without CUDA (or with --cpu-smoke) it runs the same steps end to end at tiny sizes on CPU, float32 (one warm-up and
# one timed step, ours --compile for pi05 only; about 4 minutes on the 2-core machine).
#
#   bash benchmarks/gpu_acceptance.sh [--cpu-smoke]
#   PI05_BATCH=32 GPU_BATCH=32 PEAK_TFLOPS=989 MODELS="pi05 xvla" LEROBOT_PYTHON=.venv-lerobot/bin/python \
#     bash benchmarks/gpu_acceptance.sh
#
# Python: the repository's .venv when it imports our packages, else a venv .venv-gpu over the machine's own torch
# (--system-site-packages) with our packages installed from the checkout (editable, --no-deps: nothing is fetched).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT_DIR:-$ROOT/outputs/gpu_acceptance}"
mkdir -p "$OUT"
STARTED=$SECONDS

PY="$ROOT/.venv/bin/python"
if ! { [[ -x "$PY" ]] && "$PY" -c "import embodied_core, embodied_models, torch" 2>/dev/null; }; then
  PY="$ROOT/.venv-gpu/bin/python"
  if [[ ! -x "$PY" ]]; then
    python3 -m venv --system-site-packages "$ROOT/.venv-gpu"
  fi
  "$PY" -m pip install -q --no-deps --no-build-isolation -e packages/embodied-core -e packages/embodied-data \
    -e packages/embodied-models -e packages/embodied-dist
  if ! "$PY" -c "import embodied_core, embodied_models, embodied_data, torch" 2>"$OUT/import_error.txt"; then
    echo "our packages do not import on this machine (a dependency is missing):" >&2
    tail -3 "$OUT/import_error.txt" >&2
    exit 1
  fi
fi

MODE=gpu
if [[ "${1:-}" == "--cpu-smoke" ]] || ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  MODE=cpu
fi
echo "gpu_acceptance: mode $MODE, python $PY, outputs in $OUT"
"$PY" -c "import torch; print('torch', torch.__version__, '|', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA')"

LEROBOT_PYTHON="${LEROBOT_PYTHON:-$ROOT/.venv-lerobot/bin/python}"
LEROBOT_OK=1
if ! { [[ -x "$LEROBOT_PYTHON" ]] && "$LEROBOT_PYTHON" -c "import lerobot.policies.pi05.modeling_pi05" 2>/dev/null; }; then
  # A side venv needs the package index; on a machine without it the comparisons with lerobot are left out.
  TORCH_VERSION="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')"
  if LEROBOT_PYTHON="$ROOT/.venv-lerobot/bin/python" EMBODIED_LEROBOT_TORCH="torch==$TORCH_VERSION" \
      timeout 300 bash benchmarks/setup_lerobot_venv.sh >"$OUT/lerobot_setup.log" 2>&1; then
    LEROBOT_PYTHON="$ROOT/.venv-lerobot/bin/python"
  else
    echo "lerobot side venv unavailable (see $OUT/lerobot_setup.log): the lerobot comparisons are left out"
    LEROBOT_OK=0
  fi
fi

MODELS="${MODELS:-pi05 smolvla xvla groot_n1_7 fastwam lingbot_va}"
if [[ "$MODE" == gpu ]]; then
  COMMON=(--device cuda --dtype bfloat16 --rounds 1 --steps 10 --warmup 3 --peak-tflops "${PEAK_TFLOPS:-989}")
  LINGBOT_ARGS=(--width 1536 --layers 12 --frames 8 --steps 10 --warmup 3 --peak-tflops "${PEAK_TFLOPS:-989}"
                --variants block:flex:eager linear:flex:eager block:flex:compile block:sdpa:eager)
else
  COMMON=(--size tiny --device cpu --dtype float32 --rounds 1 --steps 1 --warmup 1)  # compiling in the warm-up
  # flex attention has no backward on CPU: the smoke trains with sdpa only
  LINGBOT_ARGS=(--width 128 --layers 2 --frames 2 --image 64 --text-dim 32 --text-len 16 --steps 2 --warmup 1
                --variants block:sdpa:eager linear:sdpa:eager block:sdpa:compile)
fi

if [[ "$LEROBOT_OK" == 1 ]]; then
  for model in $MODELS; do
    args=("${COMMON[@]}")
    if [[ "$MODE" == gpu ]]; then
      if [[ "$model" == pi05 ]]; then
        args+=(--size full --batch-size "${PI05_BATCH:-32}")
      else
        args+=(--size mid --batch-size "${GPU_BATCH:-32}")
      fi
    elif [[ "$model" != pi05 ]]; then
      args+=(--no-compile)
    fi
    echo "== $model: ours vs lerobot, eager and --compile ($(( SECONDS - STARTED )) s so far)"
    rm -f "$OUT/$model.json"
    if ! timeout "${MODEL_TIMEOUT:-150}" "$PY" benchmarks/vs_lerobot.py --model "$model" "${args[@]}" \
        --lerobot-python "$LEROBOT_PYTHON" --json "$OUT/$model.json" >"$OUT/$model.stdout" 2>"$OUT/$model.stderr"; then
      echo "   $model did not finish (see $OUT/$model.stderr):"; tail -3 "$OUT/$model.stderr" >&2
      rm -f "$OUT/$model.json"
    fi
  done
fi
echo "== lingbot_va: FSDP2 block vs per-Linear units, eager vs --compile, flex vs sdpa"
"$PY" benchmarks/lingbot_va_granularity.py "${LINGBOT_ARGS[@]}" --json "$OUT/lingbot_va.granularity.json" \
  2>"$OUT/lingbot_va.granularity.stderr" || { tail -20 "$OUT/lingbot_va.granularity.stderr" >&2; exit 1; }

"$PY" - "$OUT" "$MODE" $((SECONDS - STARTED)) $MODELS <<'PY'
import json
import math
import sys
from pathlib import Path

out, mode, seconds, models = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:]


def cell(value, fmt):
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


rows = [("| run | step (ms) | vs reference | loss rel diff | peak mem (MiB) | MFU |"),
        ("|---|---:|---:|---:|---:|---:|")]
for model in models:
    path = out / f"{model}.json"
    if not path.exists():
        rows.append(f"| {model}: did not finish (see {model}.stderr) | - | - | - | - | - |")
        continue
    summary = json.loads(path.read_text())
    what = f"{model} {summary['size']} b{summary['batch']} {summary['dtype']}" + (
        " (forward only)" if summary["mode"] == "forward" else "")
    for name, row in summary["rows"].items():
        rows.append(f"| {what}: {name} | {cell(row['step_ms'], '.1f')} | {cell(row['ratio'], '.2f')}x "
                    f"| {cell(row['loss_rel_diff'], '.1e')} | {cell(row['peak_mib'], '.0f')} | {cell(row['mfu'], '.1%')} |")
lingbot_path = out / "lingbot_va.granularity.json"
if lingbot_path.exists():
    lingbot = json.loads(lingbot_path.read_text())
    runs = lingbot["runs"]
    base = next((r for r in runs if r["unit"] == "LingBotBlock" and r["mode"] == "eager"), runs[0])
    for run in runs:
        name = (f"lingbot_va {lingbot['width']}x{lingbot['layers']}: FSDP2 {run['unit']} units ({run['units']}), "
                f"{run['attention']}, {run['mode']}")
        rows.append(f"| {name} | {cell(run['step_ms'], '.1f')} | {run['step_ms'] / base['step_ms']:.3f}x | - "
                    f"| {cell(run['peak_mib'], '.0f')} | {cell(run['mfu'], '.1%')} |")
print(f"\nGPU acceptance table ({mode}, {seconds} s; model rows: 'vs reference' = time / lerobot eager's in the same "
      "round; lingbot_va FSDP2 rows: time / block units eager)")
print("\n".join(rows))
PY
