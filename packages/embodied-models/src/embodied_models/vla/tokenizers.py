"""Opening a port's text tokenizer: a local Hugging Face folder, or the port's built-in one (no torch).

Each port keeps its own tokenizer classes (what ``encode`` returns, the special ids and the built-in id layout
differ, and the tiny presets' goldens depend on them); what they share is how a folder is opened and how the
choice between folder and built-in is made and checked against the embedding table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from embodied_core.errors import ConfigError

__all__ = ["choose_tokenizer", "open_hf_tokenizer"]


class _Sized(Protocol):
    vocab_size: int


T = TypeVar("T", bound=_Sized)


def open_hf_tokenizer(path: str | Path, *, model: str, example: str) -> Any:
    """``AutoTokenizer`` of a local folder (no download), or a ConfigError naming the folder.

    Args:
        path: the folder (from data.tokenizer_path or --tokenizer-path).
        model: the port, as the message names it (``"pi0.5"``).
        example: a hub repository whose download is such a folder (``"google/paligemma-3b-pt-224"``).
    """
    path = Path(path)
    if not path.is_dir():
        raise ConfigError([f"--tokenizer-path {path}: not a directory ({model} needs a local Hugging Face "
                           f"tokenizer directory, e.g. a download of {example})"])
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ConfigError([f"--tokenizer-path {path}: cannot load a tokenizer from it: {exc}"]) from None


def choose_tokenizer(kind: str, path: str | None, *, vocab_size: int, from_folder: Callable[[str], T],
                     builtin_kind: str, builtin: Callable[[], T], folder_needed: str) -> T:
    """The tokenizer of ``model.tokenizer``: a folder when one is given (it wins over the built-in one), else the
    built-in one when ``kind`` names it, else a ConfigError; its ids must fit the embedding table.

    Args:
        kind: model.tokenizer.
        path: the resolved tokenizer folder or None.
        vocab_size: model.vocab_size.
        from_folder: builds the port's tokenizer from a folder.
        builtin_kind, builtin: the model.tokenizer value of the built-in tokenizer and its constructor.
        folder_needed: the message when a folder is needed and none is given (how to give one).
    """
    if path:
        tokenizer = from_folder(path)
    elif kind == builtin_kind:
        tokenizer = builtin()
    else:
        raise ConfigError([folder_needed])
    if tokenizer.vocab_size > vocab_size:
        raise ConfigError([f"tokenizer {path or kind} has {tokenizer.vocab_size} ids but model.vocab_size is "
                           f"{vocab_size}; raise model.vocab_size or use a matching tokenizer"])
    return tokenizer
