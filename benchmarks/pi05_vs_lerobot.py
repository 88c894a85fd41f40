"""Deprecated alias of ``benchmarks/vs_lerobot.py --model pi05`` (issue 29 folded this script into it).

    .venv/bin/python benchmarks/pi05_vs_lerobot.py [--size mid] [...]
    == .venv/bin/python benchmarks/vs_lerobot.py --model pi05 [--size mid] [...]

Every flag is ``vs_lerobot.py``'s (``--json PATH`` still writes the summary, now the flat object of
``vs_lerobot.py --json``). ``--ours-only`` is gone: the comparison needs lerobot's weights.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.vs_lerobot import main  # noqa: E402

if __name__ == "__main__":
    if "--ours-only" in sys.argv:
        raise SystemExit("pi05_vs_lerobot.py --ours-only is gone (issue 29): benchmarks/vs_lerobot.py --model pi05 "
                         "needs the lerobot side venv (bash benchmarks/setup_lerobot_venv.sh)")
    print("pi05_vs_lerobot.py is an alias of: benchmarks/vs_lerobot.py --model pi05", file=sys.stderr)
    main(["--model", "pi05", *sys.argv[1:]])
