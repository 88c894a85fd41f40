"""Run-config rules the VLA ports state the same way (no torch; ``validate`` and the specs' ``checks`` use them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["builtin_vocab_problems", "multiple_problems", "run_config_check", "tokenizer_folder_missing",
           "width_problems"]


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


def multiple_problems(model: Any, *pairs: tuple[str, str]) -> list[str]:
    """``model.<a> is not a multiple of model.<b>`` for each ``(a, b)`` of ``pairs`` whose values do not divide
    (head counts of grouped-query attention, widths split over heads)."""
    return [f"model.{a} {getattr(model, a)} is not a multiple of model.{b} {getattr(model, b)}"
            for a, b in pairs if getattr(model, a) % getattr(model, b)]


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


def run_config_check(model_config: type, data_config: type, size_problems: Callable[[Any, Any], list[str]], *,
                     needs_folder: Callable[[Any], bool], folder_message: str) -> Callable[[Any], list[str]]:
    """A port's ``check_run_config`` (what its specs' ``checks`` name): for a run config whose sections are the port's
    classes, ``size_problems(model, data)`` plus ``folder_message`` when ``needs_folder(model)`` (the model's
    text settings want a tokenizer folder) and :func:`tokenizer_folder_missing`; nothing for another model's config.
    """

    def check_run_config(config: Any) -> list[str]:
        model, data = config.model, config.data
        if not isinstance(model, model_config) or not isinstance(data, data_config):
            return []
        problems = size_problems(model, data)
        if needs_folder(model) and tokenizer_folder_missing(config):
            problems.append(folder_message)
        return problems

    check_run_config.__doc__ = (f"Extra validation of a RunConfig whose sections are {model_config.__name__} / "
                                f"{data_config.__name__} (the specs' ``checks``); see "
                                "embodied_models.vla.checks.run_config_check.")
    return check_run_config
