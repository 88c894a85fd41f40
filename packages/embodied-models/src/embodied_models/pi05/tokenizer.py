"""Prompt tokenizers of pi0.5: the PaliGemma tokenizer from a local directory, or a tiny built-in one.

pi0.5 writes the discretized state into the prompt (``"Task: ..., State: 12 250 ...;\\nAction: "``), so the
built-in ``tiny`` tokenizer gives each integer 0..255 one id and spells everything else as UTF-8 bytes:
ids 0 pad, 1 eos, 2 bos, 3..258 bytes, 259..514 the numbers 0..255. It needs no files and no download,
which is what ``pi05_tiny`` tests and CPU runs use. This module imports no torch.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Protocol

from embodied_models.vla.tokenizers import choose_tokenizer, open_hf_tokenizer

__all__ = ["TINY_VOCAB_SIZE", "HFPromptTokenizer", "PromptTokenizer", "TinyTokenizer", "load_tokenizer"]

logger = logging.getLogger("embodied.models.pi05")

PAD_ID, EOS_ID, BOS_ID = 0, 1, 2
_BYTE_BASE = 3
_NUMBER_BASE = _BYTE_BASE + 256
TINY_VOCAB_SIZE = _NUMBER_BASE + 256
_PIECES = re.compile(r"\d+|\D+")


class PromptTokenizer(Protocol):
    """What the pi0.5 transforms need: ids of one prompt (with BOS) and the vocabulary size."""

    vocab_size: int

    def encode(self, text: str) -> list[int]: ...


class TinyTokenizer:
    """Self-contained byte + small-integer tokenizer (vocab 515); see the module docstring."""

    vocab_size = TINY_VOCAB_SIZE

    def encode(self, text: str) -> list[int]:
        """BOS, then one id per integer <= 255 and one per UTF-8 byte of everything else."""
        ids = [BOS_ID]
        for piece in _PIECES.findall(text):
            if piece.isdigit() and int(piece) <= 255 and not (len(piece) > 1 and piece.startswith("0")):
                ids.append(_NUMBER_BASE + int(piece))
            else:
                ids.extend(_BYTE_BASE + b for b in piece.encode("utf-8"))
        return ids

    def decode(self, ids: list[int]) -> str:
        """Inverse of :meth:`encode` (special ids dropped)."""
        out = bytearray()
        for i in ids:
            if i >= _NUMBER_BASE:
                out.extend(str(i - _NUMBER_BASE).encode())
            elif i >= _BYTE_BASE:
                out.append(i - _BYTE_BASE)
        return out.decode("utf-8", errors="replace")


class HFPromptTokenizer:
    """A Hugging Face tokenizer loaded from a local directory (the PaliGemma SentencePiece model for pi0.5).

    Args:
        path: directory with ``tokenizer.json`` / ``tokenizer.model`` and its config.
    """

    def __init__(self, path: str | Path) -> None:
        self._tok: Any = open_hf_tokenizer(path, model="pi0.5", example="google/paligemma-3b-pt-224")
        self.path = Path(path)
        self.vocab_size = len(self._tok)

    def encode(self, text: str) -> list[int]:
        """Ids with the tokenizer's special prefix (Gemma: BOS), no padding or truncation."""
        return list(self._tok.encode(text, add_special_tokens=True))


def load_tokenizer(kind: str, path: str | None, *, vocab_size: int) -> PromptTokenizer:
    """The prompt tokenizer of ``model.tokenizer`` (``"paligemma"``: the folder ``path``; ``"tiny"``: the built-in one
    unless a folder is given), checked against ``vocab_size`` as
    :func:`~embodied_models.vla.tokenizers.choose_tokenizer` does."""
    return choose_tokenizer(kind, path, vocab_size=vocab_size, from_folder=HFPromptTokenizer, builtin_kind="tiny",
                            builtin=TinyTokenizer,
                            folder_needed="pi0.5 tokenizes its prompt with the PaliGemma tokenizer: pass "
                            "--tokenizer-path DIR (a local Hugging Face tokenizer directory) or "
                            "data.tokenizer_path=DIR")
