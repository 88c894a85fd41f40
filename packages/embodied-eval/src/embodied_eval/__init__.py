"""embodied-eval: ``embodied serve`` (openpi's websocket protocol) and ``embodied eval`` (closed-loop rollouts in
env plugins, open-loop error on datasets).

Importing this package is cheap (no torch, no simulator); names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import embodied_core as _embodied_core  # noqa: F401  # first: its finder keeps deprecated embodied_eval paths working

if TYPE_CHECKING:
    from embodied_eval.client import RemotePolicy
    from embodied_eval.closed_loop import EvalReport, evaluate
    from embodied_eval.offline import offline_eval
    from embodied_eval.rollout import RolloutSettings
    from embodied_eval.server import PolicyServer

__version__ = "0.2.0"

__all__ = ["EvalReport", "PolicyServer", "RemotePolicy", "RolloutSettings", "evaluate", "offline_eval"]

_LAZY = {
    "EvalReport": "embodied_eval.closed_loop",
    "evaluate": "embodied_eval.closed_loop",
    "offline_eval": "embodied_eval.offline",
    "PolicyServer": "embodied_eval.server",
    "RemotePolicy": "embodied_eval.client",
    "RolloutSettings": "embodied_eval.rollout",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'embodied_eval' has no attribute {name!r}")
