"""Shared fixtures; helpers live in tests/support.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import SHARED_DIR


@pytest.fixture
def shared_dir() -> Path:
    """The shared datasets and fixtures folder; skips nothing: a missing folder is a setup error."""
    assert SHARED_DIR.is_dir(), f"{SHARED_DIR} not found; set SHARED_DATA_DIR to the shared folder"
    return SHARED_DIR


@pytest.fixture(autouse=True)
def _isolate_embodied_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start without EMBODIED_* and torchrun variables of the surrounding shell."""
    for key in list(os.environ):
        if key.startswith("EMBODIED_") or key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
            monkeypatch.delenv(key, raising=False)
