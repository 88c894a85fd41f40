"""The policy folder and inference: ``load_policy(path) -> Policy``, ``export_policy(src, dst)``.

Every checkpoint is a self-contained policy folder (``policy.json``, ``stats.safetensors``, ``tokenizer/``,
``assets/`` next to the weights; see :mod:`embodied_core.policy.folder`). Importing this package is cheap;
torch is imported by the modules that need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from embodied_core.policy.export import ExportResult, export_policy
    from embodied_core.policy.load import PolicyFolder, load_policy, read_policy_folder
    from embodied_core.policy.runtime import TransformsPolicy
    from embodied_core.policy.writer import PolicyWriter

__all__ = ["ExportResult", "PolicyFolder", "PolicyWriter", "TransformsPolicy", "export_policy", "load_policy",
           "read_policy_folder"]

_LAZY = {
    "ExportResult": "embodied_core.policy.export",
    "export_policy": "embodied_core.policy.export",
    "PolicyFolder": "embodied_core.policy.load",
    "load_policy": "embodied_core.policy.load",
    "read_policy_folder": "embodied_core.policy.load",
    "TransformsPolicy": "embodied_core.policy.runtime",
    "PolicyWriter": "embodied_core.policy.writer",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'embodied_core.policy' has no attribute {name!r}")
