"""Checks of flags that name a location on disk, run at validation (before any model or dataset is built)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

__all__ = ["tokenizer_path_problem"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
"""``owner/name``: a Hugging Face hub repository id (FLAGS.md: ``--tokenizer-path`` is a local path or a hub id)."""


def tokenizer_path_problem(value: str) -> str | None:
    """Why ``--tokenizer-path value`` cannot be a tokenizer, or None when it can.

    A local directory passes. A hub id (``owner/name``, not present on disk) passes only when ``huggingface_hub``
    is installed to resolve it; anything else (a missing directory, a file) is reported with what would be valid.
    """
    path = Path(value).expanduser()
    if path.is_dir():
        return None
    if path.exists():
        return (f"--tokenizer-path {value}: is a file, not a tokenizer directory (a folder holding tokenizer.json "
                "or tokenizer.model and tokenizer_config.json)")
    if _HUB_ID.match(value):
        if importlib.util.find_spec("huggingface_hub") is not None:
            return None
        return (f"--tokenizer-path {value}: no such directory, and hub ids need huggingface_hub "
                "(pip install huggingface_hub); or pass a local tokenizer directory")
    return (f"--tokenizer-path {value}: no such directory; pass a local tokenizer directory (a folder holding "
            "tokenizer.json or tokenizer.model, e.g. a download of google/paligemma-3b-pt-224)")
