"""Task tokenizers of SmolVLA: SmolVLM2's from a local directory, or a built-in byte tokenizer for tiny runs.

lerobot appends ``"\\n"`` to the task when it lacks one, tokenizes it with the VLM's tokenizer (its special
tokens included), truncates to ``tokenizer_max_length`` and right-pads. The built-in ``tiny`` tokenizer spells the
text as UTF-8 bytes: ids 0 pad, 1 eos, 2 bos, 3..258 bytes, 259 / 260 stand-ins for SmolVLM's
<fake_token_around_image> / <global-img> (never produced from text). This module imports no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from embodied_models.vla.tokenizers import choose_tokenizer, open_hf_tokenizer

__all__ = ["TINY_VOCAB_SIZE", "HFTaskTokenizer", "TaskTokenizer", "TinyByteTokenizer", "load_tokenizer",
           "task_text"]

TINY_PAD_ID, TINY_EOS_ID, TINY_BOS_ID = 0, 1, 2
_BYTE_BASE = 3
TINY_FAKE_IMAGE_ID = _BYTE_BASE + 256
TINY_GLOBAL_IMAGE_ID = TINY_FAKE_IMAGE_ID + 1
TINY_VOCAB_SIZE = TINY_GLOBAL_IMAGE_ID + 1


def task_text(task: str) -> str:
    """The text SmolVLA tokenizes: the task with a trailing newline (added when missing, as lerobot does)."""
    return task if task.endswith("\n") else f"{task}\n"


class TaskTokenizer(Protocol):
    """What the SmolVLA transforms need: the ids of one text, the padding id and the vocabulary size."""

    vocab_size: int
    pad_id: int

    def encode(self, text: str) -> list[int]: ...


class TinyByteTokenizer:
    """Self-contained byte tokenizer (vocab 261); see the module docstring."""

    vocab_size = TINY_VOCAB_SIZE
    pad_id = TINY_PAD_ID

    def encode(self, text: str) -> list[int]:
        """BOS, then one id per UTF-8 byte."""
        return [TINY_BOS_ID, *(_BYTE_BASE + b for b in text.encode("utf-8"))]


class HFTaskTokenizer:
    """A Hugging Face tokenizer loaded from a local directory (SmolVLM2's for SmolVLA).

    Args:
        path: directory with ``tokenizer.json`` (or the slow files) and its config.
    """

    def __init__(self, path: str | Path) -> None:
        self._tok: Any = open_hf_tokenizer(path, model="SmolVLA", example="HuggingFaceTB/SmolVLM2-500M-Video-Instruct")
        self.path = Path(path)
        self.vocab_size = len(self._tok)
        pad = self._tok.pad_token_id
        self.pad_id = int(pad) if pad is not None else 0

    def encode(self, text: str) -> list[int]:
        """Ids with the tokenizer's own special tokens, no padding or truncation."""
        return list(self._tok.encode(text, add_special_tokens=True))


def load_tokenizer(kind: str, path: str | None, *, vocab_size: int) -> TaskTokenizer:
    """The task tokenizer of ``model.tokenizer`` (``"smolvlm"``: the folder ``path``; ``"tiny"``: the built-in one
    unless a folder is given), checked against ``vocab_size`` as
    :func:`~embodied_models.vla.tokenizers.choose_tokenizer` does."""
    return choose_tokenizer(kind, path, vocab_size=vocab_size, from_folder=HFTaskTokenizer, builtin_kind="tiny",
                            builtin=TinyByteTokenizer,
                            folder_needed="SmolVLA tokenizes the task with SmolVLM2's tokenizer: pass --tokenizer-path "
                            "DIR (a local Hugging Face tokenizer directory) or data.tokenizer_path=DIR")
