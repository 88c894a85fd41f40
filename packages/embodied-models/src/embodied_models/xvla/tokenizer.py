"""Instruction tokenizers of X-VLA: BART's from a local directory, or a built-in byte tokenizer.

X-VLA tokenizes the task with the BART tokenizer (lerobot: ``facebook/bart-large``), truncated and right-padded
to ``model.tokenizer_max_length`` (64); the pad tokens are attended like any other. The built-in ``bytes``
tokenizer follows BART's special ids (0 BOS, 1 pad, 2 EOS) and spells the text as UTF-8 bytes (ids 4..259), so
``xvla_tiny`` needs no files. This module imports no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from embodied_core.errors import ConfigError
from embodied_models.vla.tokenizers import choose_tokenizer, open_hf_tokenizer

__all__ = ["BYTES_VOCAB_SIZE", "ByteTokenizer", "HFInstructionTokenizer", "InstructionTokenizer", "load_tokenizer"]

BOS_ID, PAD_ID, EOS_ID = 0, 1, 2
_BYTE_BASE = 4
BYTES_VOCAB_SIZE = _BYTE_BASE + 256


class InstructionTokenizer(Protocol):
    """What the X-VLA transforms need: ``length`` ids of one instruction, and the vocabulary size."""

    vocab_size: int
    pad_id: int

    def encode(self, text: str, length: int) -> list[int]: ...


class ByteTokenizer:
    """Self-contained byte tokenizer with BART's special ids (vocab 260); see the module docstring."""

    vocab_size = BYTES_VOCAB_SIZE
    pad_id = PAD_ID

    def encode(self, text: str, length: int) -> list[int]:
        """BOS, the UTF-8 bytes (truncated so that EOS fits), EOS, then pad ids up to ``length``."""
        body = [_BYTE_BASE + b for b in text.encode("utf-8")][: length - 2]
        ids = [BOS_ID, *body, EOS_ID]
        return ids + [PAD_ID] * (length - len(ids))


class HFInstructionTokenizer:
    """A Hugging Face tokenizer loaded from a local directory (BART's for X-VLA).

    Args:
        path: directory with ``tokenizer.json`` (or vocab/merges files) and its config.
    """

    def __init__(self, path: str | Path) -> None:
        self._tok: Any = open_hf_tokenizer(path, model="X-VLA", example="facebook/bart-large")
        if self._tok.pad_token_id is None:
            raise ConfigError([f"--tokenizer-path {path}: the tokenizer has no pad token; X-VLA pads every "
                               "instruction to model.tokenizer_max_length"])
        self.path = Path(path)
        self.vocab_size = len(self._tok)
        self.pad_id = int(self._tok.pad_token_id)

    def encode(self, text: str, length: int) -> list[int]:
        """Ids with the tokenizer's special tokens, truncated and right-padded to ``length``."""
        out = self._tok(text, max_length=length, padding="max_length", truncation=True, add_special_tokens=True)
        return [int(i) for i in out["input_ids"]]


def load_tokenizer(kind: str, path: str | None, *, vocab_size: int) -> InstructionTokenizer:
    """The tokenizer of ``model.tokenizer`` (``"bart"``: the folder ``path``; ``"bytes"``: the built-in one unless a
    folder is given), checked against ``vocab_size`` as :func:`~embodied_models.vla.tokenizers.choose_tokenizer`
    does."""
    return choose_tokenizer(kind, path, vocab_size=vocab_size, from_folder=HFInstructionTokenizer, builtin_kind="bytes",
                            builtin=ByteTokenizer,
                            folder_needed="X-VLA tokenizes its instruction with the BART tokenizer: pass "
                            "--tokenizer-path DIR (a local Hugging Face tokenizer directory, e.g. facebook/bart-large) "
                            "or data.tokenizer_path=DIR; model.tokenizer=bytes uses the built-in byte tokenizer "
                            "instead")
