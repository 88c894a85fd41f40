"""Run-config rules the VLA ports state the same way (no torch; ``validate`` and the specs' ``checks`` use them)."""

from __future__ import annotations

from typing import Any

__all__ = ["builtin_vocab_problems", "tokenizer_folder_missing", "width_problems"]


def width_problems(kind: str, dim: int | None, limit: int, *, consequence: str = "") -> list[str]:
    """The message for a real state/action width above the model's padded one (empty when it fits).

    Args:
        kind: ``"state"`` or ``"action"`` (names data.<kind>_dim and model.max_<kind>_dim).
        dim: the data's width (None: not known yet, nothing to check).
        limit: the model's padded width.
        consequence: appended after the fix, e.g. ``" (a new action projection, ...)"``.
    """
    if dim is None or dim <= limit:
        return []
    return [f"data.{kind}_dim {dim} exceeds model.max_{kind}_dim {limit}; set model.max_{kind}_dim={dim}{consequence}"]


def builtin_vocab_problems(vocab_size: int, ids: int, *, builtin: str, alternative: str) -> list[str]:
    """The message for an embedding table smaller than a built-in tokenizer's ids (empty when it fits).

    Args:
        vocab_size: model.vocab_size.
        ids: the built-in tokenizer's vocabulary size.
        builtin: what the built-in tokenizer is called in the message (``"tiny tokenizer"``).
        alternative: the model.tokenizer setting that needs no built-in ids (``"model.tokenizer=paligemma"``).
    """
    if vocab_size >= ids:
        return []
    return [f"model.vocab_size {vocab_size} is smaller than the {builtin}'s {ids} ids; raise it or use {alternative}"]


def tokenizer_folder_missing(config: Any) -> bool:
    """Whether a run config names no tokenizer folder: neither data.tokenizer_path, nor --tokenizer-path, nor the
    TOKENIZER_PATH environment variable."""
    data = config.data
    return not (data.tokenizer_path or config.training.tokenizer_path or data.resolved_tokenizer_path())
