#!/usr/bin/env bash
# Sets up everything on a fresh machine (Python 3.11, root, apt and PyPI reachable): Debian's FFmpeg
# (for torchcodec and PyAV), .venv with torch 2.13.0 (CPU build), the four embodied packages and the
# plugin template in editable mode, and the dev tools. Safe to run again.
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
"${PIP[@]}" -e packages/embodied-core -e packages/embodied-data -e packages/embodied-dist \
    -e packages/embodied-models -e examples/plugin-template
.venv/bin/embodied plugins >/dev/null
