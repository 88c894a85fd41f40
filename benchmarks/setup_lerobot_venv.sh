#!/usr/bin/env bash
# Side venv .venv-lerobot with lerobot 0.6.1 (with what its smolvla and metaworld extras add), for the side-by-side
# benchmarks (benchmarks/dataloader.py --lerobot, benchmarks/pi05_vs_lerobot.py, benchmarks/metaworld_benchmark.py,
# benchmarks/gpu_acceptance.sh) and the tests that check lerobot reads our datasets (tests/data/test_lerobot_reads.py).
# scripts/setup.sh runs it; safe to run again.
#
# lerobot 0.6.1 declares Requires-Python >= 3.12 and pins torch < 2.12. Its Python-3.12-only syntax is confined to
# a handful of module-level declarations (PEP 695 `type X = ...` aliases and `class C[T]` / `def f[T]` generics),
# so it is installed here on Python 3.11 with --ignore-requires-python --no-deps, those declarations are rewritten
# to their 3.11 spelling (TypeVar / Generic, plain aliases), and its runtime dependencies are installed next to
# our torch 2.13.0 (installed first, so no other torch build is pulled in). The same approach as LoongForge's
# docker/Dockerfile.xpu (which patches lerobot 0.5.0 with sed for Python 3.10).
#
#   bash benchmarks/setup_lerobot_venv.sh [VENV_DIR]          # default: .venv-lerobot at the repository root
#   EMBODIED_LEROBOT_TORCH="torch==2.13.0" ...                   # the torch requirement (a CUDA build on a GPU host)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-lerobot}"
PYTHON="${PYTHON:-python3.11}"
TORCH_REQ="${EMBODIED_LEROBOT_TORCH:-torch==2.13.0}"
LEROBOT_VERSION=0.6.1

if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install -q)
"${PIP[@]}" "$TORCH_REQ"
TORCH_VERSION="$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')"
# torchvision: lerobot.configs imports its transforms. PyPI's build for this torch links the CUDA torch libraries, so
# with a CPU torch its compiled ops (_C) do not load; lerobot only needs the pure-Python transforms. Its module that
# registers fake kernels for two compiled ops (nms, qnms) is made to skip them when the ops are absent, as it
# already does for its other ops (scripts/patch_torchvision.py, shared with scripts/setup.sh). On a CUDA host the ops
# load and nothing changes.
TORCHVISION_VERSION="${EMBODIED_LEROBOT_TORCHVISION:-0.28.0}"
"${PIP[@]}" --no-deps "torchvision==$TORCHVISION_VERSION"
# torchcodec: the release built against this torch (the one our own venv uses); lerobot's pin (< 0.12) predates it.
TORCHCODEC_VERSION="$("$ROOT/.venv/bin/python" -c 'import importlib.metadata as m; print(m.version("torchcodec"))' \
  2>/dev/null || echo 0.13.0)"
"${PIP[@]}" --no-deps --ignore-requires-python "lerobot==$LEROBOT_VERSION"
"${PIP[@]}" "torch==$TORCH_VERSION" "torchcodec==$TORCHCODEC_VERSION" \
  "datasets>=4.8,<5" "pandas>=2,<3" "pyarrow>=21" "jsonlines>=4" "av>=15,<16" \
  "transformers>=5.4,<5.6" "scipy>=1.14" "numpy>=2,<2.3" "draccus>=0.11.6,<0.12" "huggingface-hub>=1.6,<2" \
  "einops>=0.8" "safetensors>=0.4.3" "gymnasium>=1.1.1" "termcolor>=2.4" "tqdm>=4.66" "packaging>=24.2" \
  "Pillow>=10" "opencv-python-headless>=4.9" "requests>=2.32" "psutil" \
  "accelerate>=1.14,<2" "num2words>=0.5.14,<0.6" "metaworld==3.0.0" "mujoco==3.3.0" "diffusers==0.39.0"
# Above: accelerate (lerobot-train's loop) and num2words (SmolVLM's processor) are lerobot's smolvla/training extras;
# metaworld 3.0.0 is what its metaworld extra pins, with mujoco 3.3.0 (the frames depend on the mujoco version; the
# golden fixtures/metaworld_lerobot was recorded with it). diffusers (lerobot's fastwam/groot/lingbot_va extras; 0.39.0
# made the shared goldens) for the second-golden generators benchmarks/<port>_second_golden.py.

"$VENV/bin/python" "$ROOT/scripts/patch_torchvision.py" >/dev/null

# Rewrite the Python-3.12-only declarations (idempotent: a second run finds nothing to change).
"$VENV/bin/python" - <<'PY'
import pathlib
import re

import lerobot

root = pathlib.Path(lerobot.__file__).parent
edits = {
    "datasets/aggregate.py": [(r"^type (\w+) = ", r"\1 = ")],
    "motors/motors_bus.py": [(r"^type (\w+) = ", r"\1 = ")],
    "datasets/streaming_dataset.py": [
        (r"^class Backtrackable\[T\]:", "from typing import Generic as _Generic, TypeVar as _TypeVar\n"
                                        "T = _TypeVar('T')\n\n\nclass Backtrackable(_Generic[T]):")],
    "processor/pipeline.py": [
        (r"^@dataclass\nclass DataProcessorPipeline\[TInput, TOutput\]\(HubMixin\):",
         "from typing import Generic as _Generic, TypeVar as _TypeVar\nTInput = _TypeVar('TInput')\n"
         "TOutput = _TypeVar('TOutput')\n\n\n@dataclass\n"
         "class DataProcessorPipeline(HubMixin, _Generic[TInput, TOutput]):")],
    "utils/io_utils.py": [
        (r"^def deserialize_json_into_object\[T: JsonLike\]\(",
         "from typing import TypeVar as _TypeVar\nT = _TypeVar('T', bound=JsonLike)\n\n\n"
         "def deserialize_json_into_object(")],
}
for name, rules in edits.items():
    path = root / name
    text = path.read_text()
    for pattern, replacement in rules:
        text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    path.write_text(text)
bad = []
for path in root.rglob("*.py"):
    try:
        compile(path.read_text(), str(path), "exec")
    except SyntaxError as exc:
        bad.append(f"{path.relative_to(root)}:{exc.lineno}")
if bad:
    raise SystemExit("lerobot modules still not valid Python 3.11: " + ", ".join(bad))
PY
"$VENV/bin/python" -c "
import lerobot, torch
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.policies.pi05.modeling_pi05 import PI05Pytorch
from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
import lerobot.envs.metaworld, lerobot.scripts.lerobot_train
print(f'{__import__(\"sys\").argv[0] or \"venv\"}: lerobot', __import__('importlib.metadata').metadata.version('lerobot'),
      'torch', torch.__version__)"
echo "lerobot side venv ready: $VENV"
