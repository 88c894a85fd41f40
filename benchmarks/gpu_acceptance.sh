#!/usr/bin/env bash
# GPU acceptance run (issue 19): one script, meant to finish in under 8 minutes on one H200-class GPU, that prints
# one table:
#   - pi05 at the released size (PaliGemma 2B + 300M expert), bf16 autocast, one batch that fits: step time, peak
#     memory and MFU, ours eager, ours --compile, and lerobot 0.6.1's PI05Pytorch on the same GPU, batch, weights,
#     inputs, noise and time (benchmarks/pi05_vs_lerobot.py; lerobot from the side venv when it is there);
#   - lingbot_va at a mid size (1536 wide x 12 layers, 8 latent frames) under FSDP2 on one rank: one unit per
#     block vs one per Linear, eager vs --compile, flex vs sdpa attention (benchmarks/lingbot_va_granularity.py).
# MFU counts matmul FLOPs per token (6 x the weights a token passes through, plus the attention matmuls; the docs of
# both benchmarks say exactly what is counted) over the GPU's bf16 dense peak (PEAK_TFLOPS, default 989: H200).
#
# Without CUDA (or with --cpu-smoke) it runs the same steps end to end at tiny sizes on CPU, float32.
#
#   bash benchmarks/gpu_acceptance.sh [--cpu-smoke]
#   PI05_BATCH=32 PEAK_TFLOPS=989 LEROBOT_PYTHON=.venv-lerobot/bin/python bash benchmarks/gpu_acceptance.sh
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
LEROBOT_ARGS=(--lerobot-python "$LEROBOT_PYTHON")
if ! { [[ -x "$LEROBOT_PYTHON" ]] && "$LEROBOT_PYTHON" -c "import lerobot.policies.pi05.modeling_pi05" 2>/dev/null; }; then
  # A side venv needs the package index; on a machine without it the comparison with lerobot is left out.
  TORCH_VERSION="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')"
  if LEROBOT_PYTHON="$ROOT/.venv-lerobot/bin/python" EMBODIED_LEROBOT_TORCH="torch==$TORCH_VERSION" \
      timeout 300 bash benchmarks/setup_lerobot_venv.sh >"$OUT/lerobot_setup.log" 2>&1; then
    LEROBOT_ARGS=(--lerobot-python "$ROOT/.venv-lerobot/bin/python")
  else
    echo "lerobot side venv unavailable (see $OUT/lerobot_setup.log): pi05 runs ours only"
    LEROBOT_ARGS=(--ours-only)
  fi
fi

if [[ "$MODE" == gpu ]]; then
  PI05_ARGS=(--size full --device cuda --dtype bfloat16 --batch-size "${PI05_BATCH:-32}" --rounds 1 --steps 10
             --warmup 3 --peak-tflops "${PEAK_TFLOPS:-989}")
  LINGBOT_ARGS=(--width 1536 --layers 12 --frames 8 --steps 10 --warmup 3 --peak-tflops "${PEAK_TFLOPS:-989}"
                --variants block:flex:eager linear:flex:eager block:flex:compile block:sdpa:eager)
else
  PI05_ARGS=(--size tiny --device cpu --dtype float32 --rounds 1 --steps 2 --warmup 1)
  # flex attention has no backward on CPU: the smoke trains with sdpa only
  LINGBOT_ARGS=(--width 128 --layers 2 --frames 2 --image 64 --text-dim 32 --text-len 16 --steps 2 --warmup 1
                --variants block:sdpa:eager linear:sdpa:eager block:sdpa:compile)
fi

echo "== pi05: ours vs lerobot PI05Pytorch, eager and --compile"
"$PY" benchmarks/pi05_vs_lerobot.py "${PI05_ARGS[@]}" "${LEROBOT_ARGS[@]}" --json "$OUT/pi05.json" \
  2>"$OUT/pi05.stderr" || { tail -20 "$OUT/pi05.stderr" >&2; exit 1; }
echo "== lingbot_va: FSDP2 block vs per-Linear units, eager vs --compile, flex vs sdpa"
"$PY" benchmarks/lingbot_va_granularity.py "${LINGBOT_ARGS[@]}" --json "$OUT/lingbot_va.json" \
  2>"$OUT/lingbot_va.stderr" || { tail -20 "$OUT/lingbot_va.stderr" >&2; exit 1; }

"$PY" - "$OUT" "$MODE" $((SECONDS - STARTED)) <<'PY'
import json
import math
import sys
from pathlib import Path

out, mode, seconds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])


def cell(value, fmt):
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


pi05, lingbot = json.loads((out / "pi05.json").read_text()), json.loads((out / "lingbot_va.json").read_text())
rows = [("| run | step (ms) | vs reference | max loss diff | peak mem (MiB) | MFU |"),
        ("|---|---:|---:|---:|---:|---:|")]
for row in pi05["rows"]:
    rows.append(f"| pi05 {pi05['size']} b{pi05['batch']} {pi05['dtype']}: {row['name']} | {cell(row['step_ms'], '.1f')} "
                f"| {cell(row['ratio'], '.2f')}x | {cell(row['loss_diff'], '.2e')} | {cell(row['peak_mib'], '.0f')} "
                f"| {cell(row['mfu'], '.1%')} |")
runs = lingbot["runs"]
base = next((r for r in runs if r["unit"] == "LingBotBlock" and r["mode"] == "eager"), runs[0])
for run in runs:
    name = (f"lingbot_va {lingbot['width']}x{lingbot['layers']}: FSDP2 {run['unit']} units ({run['units']}), "
            f"{run['attention']}, {run['mode']}")
    rows.append(f"| {name} | {cell(run['step_ms'], '.1f')} | {run['step_ms'] / base['step_ms']:.3f}x | - "
                f"| {cell(run['peak_mib'], '.0f')} | {cell(run['mfu'], '.1%')} |")
linear = next((r for r in runs if r["unit"] == "Linear" and r["mode"] == "eager"), None)
print(f"\nGPU acceptance table ({mode}, {seconds} s; pi05 'vs reference' = time / lerobot eager's, or / ours eager's "
      "without lerobot; lingbot_va 'vs reference' = time / block units eager)")
print("\n".join(rows))
if linear is not None:
    print(f"lingbot_va per-Linear / per-block step time: {linear['step_ms'] / base['step_ms']:.3f}x "
          "(the seed's claim: 1.249x)")
PY
