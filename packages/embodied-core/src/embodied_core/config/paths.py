"""Checks of flags that name a location on disk, run at validation (before any model or dataset is built)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

__all__ = ["dataset_path_under_root", "tokenizer_path_problem"]

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


def dataset_path_under_root(dataset_path: str | None, data_root_dir: str | None) -> str | None:
    """``--dataset-path`` resolved against ``--data-root-dir``: a relative path under the root (made absolute, so
    resolving twice changes nothing); an absolute path, or no root, as given."""
    if dataset_path is None or data_root_dir is None:
        return dataset_path
    path = Path(dataset_path).expanduser()
    if path.is_absolute():
        return dataset_path
    return str((Path(data_root_dir).expanduser() / path).absolute())
