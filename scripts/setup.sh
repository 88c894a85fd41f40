#!/usr/bin/env bash
# Sets up everything on a fresh machine (Python 3.11, root, apt and PyPI reachable): Debian's FFmpeg
# (for torchcodec and PyAV), .venv with torch 2.13.0 (CPU build), the embodied packages and the
# plugin template in editable mode, the dev tools, the simulators embodied eval's tests use (gym-pusht, metaworld,
# gym-aloha), .venv-openpi-client with openpi's client and .venv-lerobot with lerobot 0.6.1. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v ffmpeg >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq ffmpeg >/dev/null
fi

PYTHON="${PYTHON:-python3.11}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
# torch first and pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" -r requirements-dev.txt
# embodied-core[lora] brings peft (--use-lora); torch is already pinned above, so pip keeps it.
"${PIP[@]}" -e "packages/embodied-core[lora]" -e packages/embodied-data -e packages/embodied-dist \
    -e packages/embodied-models -e examples/plugin-template
"${PIP[@]}" -e packages/embodied-eval
# torchvision (embodied-data[augment]: the image augmentation layer's transforms.v2) at the release built for torch
# 2.13.0, without its dependencies so pip cannot swap our CPU torch. PyPI's wheel links the CUDA torch libraries, so
# its compiled ops do not load next to a CPU torch; scripts/patch_torchvision.py makes its import skip their fake
# kernels (only the pure-Python transforms are used).
"${PIP[@]}" --no-deps "torchvision==0.28.0"
.venv/bin/python scripts/patch_torchvision.py >/dev/null
# Simulators for `embodied eval` (the extras embodied-eval[pusht] / [aloha]). gym-pusht goes in without its
# opencv-python pin, whose cv2 would shadow the opencv-python-headless the dev tools install; it only calls
# cv2.resize/drawMarker, which the headless build has. gym-aloha renders headless through Mesa's EGL.
"${PIP[@]}" "pymunk>=6.6,<7" "pygame>=2.5.2,<2.7" "shapely>=2.0.3"
"${PIP[@]}" --no-deps "gym-pusht>=0.1.5,<0.2"
# MetaWorld (embodied-eval[metaworld]) at what lerobot 0.6.1 pins, metaworld 3.0.0, with mujoco 3.3.0 (the
# frames depend on the mujoco version; the golden fixtures/metaworld_lerobot replays bit-identically with these).
# dm_control 1.0.28 is the newest release gym-aloha can use that accepts mujoco 3.3.0 (1.0.30+ need >=3.3.2).
"${PIP[@]}" "gym-aloha>=0.1.1,<0.2" "dm_control==1.0.28" "mujoco==3.3.0" "metaworld==3.0.0"
if ! ldconfig -p | grep -q libEGL_mesa; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq libegl1 libegl-mesa0 libgl1-mesa-dri >/dev/null
fi
# The real openpi-client for the serve tests, in its own venv: it pins numpy<2 (and imports
# typing_extensions without declaring it).
if [ ! -x .venv-openpi-client/bin/python ]; then
    "$PYTHON" -m venv .venv-openpi-client
fi
.venv-openpi-client/bin/python -m pip install -q --disable-pip-version-check "openpi-client==0.1.2" \
    "typing_extensions>=4"
# lerobot 0.6.1 (smolvla + metaworld) in .venv-lerobot, next to our torch: the tests that check lerobot reads our
# datasets and the MetaWorld side-by-side benchmark run it (about 4 minutes on a fresh machine).
bash benchmarks/setup_lerobot_venv.sh >/dev/null
.venv/bin/embodied plugins >/dev/null
