"""Shared fixtures; helpers live in tests/support.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import SHARED_DIR


@pytest.fixture
def shared_dir() -> Path:
    """The shared datasets and fixtures folder; skips nothing: a missing folder is a setup error."""
    assert SHARED_DIR.is_dir(), f"{SHARED_DIR} not found; set SHARED_DATA_DIR to the shared folder"
    return SHARED_DIR


@pytest.fixture(autouse=True)
def _isolate_embodied_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests start without EMBODIED_*, TOKENIZER_PATH and torchrun variables of the surrounding shell, and what a
    test leaves in os.environ (an in-process ``Trainer`` exports ``--tokenizer-path`` as TOKENIZER_PATH) is undone
    after it, so it cannot reach the tests that follow."""
    saved = dict(os.environ)
    for key in list(os.environ):
        if key.startswith("EMBODIED_") or key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                  "TOKENIZER_PATH"):
            monkeypatch.delenv(key, raising=False)
    yield
    os.environ.clear()
    os.environ.update(saved)
