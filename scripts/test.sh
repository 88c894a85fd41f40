#!/usr/bin/env bash
# Runs the whole test suite (what CI runs) and prints how long it took. Extra arguments go to pytest
# (e.g. `bash scripts/test.sh tests/core -n 0` runs one folder in this process).
#
# Test files run in parallel on two pytest-xdist workers (one CPU core each on the 2-core CI machine): whole
# files per worker (--dist loadfile), so module- and session-scoped fixtures are built once per file, and one
# intra-op thread per process (OMP_NUM_THREADS=1), so two workers and their subprocesses do not fight over
# the cores. torch.compile's kernels are cached in .cache/torchinductor (ignored by git): on a machine without
# that cache the --compile tests run once first, alone, to fill it (about 2 minutes of C++ kernel builds on 2
# cores, timed and printed separately), so that no test of the suite waits for the compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$PWD/.cache/torchinductor}"
if [ ! -d "$TORCHINDUCTOR_CACHE_DIR" ] && [ "${WARM_COMPILE_CACHE:-1}" = 1 ]; then
    start=$SECONDS
    .venv/bin/python -m pytest -q -p no:cacheprovider --timeout 900 tests/core/test_compile.py -k compiled \
        >/dev/null 2>&1 || echo "compile-cache warm-up: the compile tests failed (the suite below reports why)"
    elapsed=$((SECONDS - start))
    printf 'compile-cache warm-up (once per machine): %d s\n' "$elapsed"
fi
start=$SECONDS
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider --timeout 900 -n "${TEST_WORKERS:-2}" --dist loadfile \
    --durations=15 "$@" || status=$?
elapsed=$((SECONDS - start))
printf 'test suite: %d s (%dm%02ds), exit code %d\n' "$elapsed" $((elapsed / 60)) $((elapsed % 60)) "$status"
exit "$status"
