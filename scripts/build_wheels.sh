#!/usr/bin/env bash
# Builds one wheel per package (packages/*) into wheelhouse/ (or the folder given as $1), so that only some
# of the packages can be installed and their embodied dependencies still resolve:
#
#   bash scripts/build_wheels.sh
#   pip install --find-links wheelhouse embodied-models     # pulls embodied-core and embodied-data too
#
# None of the packages is on a package index, which is why `pip install packages/embodied-data` alone cannot
# find embodied-core. Third-party dependencies (torch, ...) still come from your index; add --no-index to
# install offline from what is already installed. PYTHON selects the interpreter (default: .venv/bin/python,
# else python3). Wheels are built without build isolation when hatchling is importable (offline), else pip
# fetches hatchling into an isolated build environment.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-wheelhouse}"
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
ISOLATION=()
if "$PYTHON" -c "import hatchling" 2>/dev/null; then
    ISOLATION=(--no-build-isolation)
fi

mkdir -p "$OUT"
for package in packages/*/; do
    [ -f "$package/pyproject.toml" ] || continue
    "$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps "${ISOLATION[@]}" --wheel-dir "$OUT" \
        "$package"
done
ls -1 "$OUT"/*.whl
