"""torchvision's transforms, imported when an op is built, with an error that says how to install them."""

from __future__ import annotations

import functools
from typing import Any

from embodied_core.errors import UsageError

__all__ = ["INSTALL_HINT", "transforms_v1", "transforms_v2"]

INSTALL_HINT = ("pip install 'embodied-data[augment]' (torchvision); next to a CPU-only torch build from PyPI, run "
                "scripts/patch_torchvision.py once so its import skips the compiled ops it cannot load")


@functools.cache
def _import(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise UsageError(f"image augmentation needs torchvision, which is not installed: {INSTALL_HINT}") from exc
    except Exception as exc:  # e.g. torchvision's compiled ops failing to register next to this torch
        raise UsageError(f"image augmentation needs torchvision, which fails to import here ({type(exc).__name__}: "
                         f"{exc}): {INSTALL_HINT}") from exc


def transforms_v2() -> Any:
    """``torchvision.transforms.v2``."""
    return _import("torchvision.transforms.v2")


def transforms_v1() -> Any:
    """``torchvision.transforms`` (v1; its ``functional`` module)."""
    return _import("torchvision.transforms")
