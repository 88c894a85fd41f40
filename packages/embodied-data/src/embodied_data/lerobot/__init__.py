"""LeRobot datasets (v2.0, v2.1, v3.0) read with our own code: metadata, the map-style dataset, the factory.

``embodied_data.lerobot.metadata`` is light (pyarrow, numpy; no torch) and serves ``embodied data inspect``;
``embodied_data.lerobot.dataset`` holds the torch Dataset.

The names below are resolved on first use (PEP 562): the format's entry-point spec lives in this package
(``embodied_data.lerobot.specs``), and ``embodied train --help`` reads that spec, so importing the package must
not import numpy and the metadata reader.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["EpisodeInfo", "FeatureInfo", "LeRobotMeta", "VideoSegment", "read_version"]

_HOMES = {"FeatureInfo": "features", "EpisodeInfo": "metadata", "LeRobotMeta": "metadata",
          "VideoSegment": "metadata", "read_version": "metadata"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
