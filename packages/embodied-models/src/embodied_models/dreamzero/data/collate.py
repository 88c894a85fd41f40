"""The DreamZero collator: samples of :mod:`.transforms` -> :class:`DreamZeroBatch`.

Fields (the golden batch's, ``B`` samples)::

    state [B, S, Ds] f32, state_mask bool, action [B, A, Da] f32, action_mask bool, lapa_action, lapa_action_mask,
    segmentation_target [B, 2] f64, segmentation_target_mask [B, 1] f64, has_real_action [B], has_lapa_action [B],
    is_cotrain_instance [B] (bool), images [B, T, H, W, 3] uint8, embodiment_id [B] int64,
    text / text_attention_mask [B, L] int64      the embodiment prompt (embodiments.prompt_for), UMT5 ids
    text_negative / text_attention_mask_negative [B, L] int64   Wan's negative prompt
    video_latents [B, C, T', h, w], first_frame_latents, prompt_embs [B, L', D]   when the cache provides them

Prompts are cleaned as Wan cleans them (ftfy, HTML-unescaped twice, whitespace collapsed) and
tokenized to ``max_length`` (padded, truncated). No extra fields. Samples of different shapes (DROID anchors with
1 and 2 language chunks) cannot be stacked: that is a DataError naming the field and the setting that avoids it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embodied_core.errors import DataError, UsageError
from embodied_core.model_api import TensorBatch
from embodied_models.dreamzero.data.embodiments import prompt_for
from embodied_models.wan.text import clean_prompt

__all__ = ["DreamZeroBatch", "DreamZeroCollator", "clean_text", "load_tokenizer"]


class DreamZeroBatch(TensorBatch):
    """DreamZero's prepared batch: a dict of tensors with ``.to(device)`` (fields: module docstring)."""


def clean_text(text: str) -> str:
    """Wan's prompt cleaning (:func:`embodied_models.wan.text.clean_prompt`)."""
    return clean_prompt(text)


def load_tokenizer(path: str | Path) -> Any:
    """The UMT5 tokenizer of a local folder (``tokenizer.json``); never the model hub."""
    from transformers import AutoTokenizer

    folder = Path(path)
    if not folder.is_dir() or (not (folder / "tokenizer.json").is_file() and not any(folder.glob("*.model"))):
        raise UsageError(f"tokenizer path {folder}: not a folder with tokenizer.json (the UMT5 tokenizer, e.g. "
                         "google/umt5-xxl downloaded locally); set data.tokenizer_path or --tokenizer-path")
    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def _stack(key: str, values: Sequence[Any]) -> torch.Tensor:
    try:
        if all(isinstance(v, torch.Tensor) for v in values):
            return torch.stack(list(values))
        return torch.from_numpy(np.stack([np.asarray(v) for v in values]))
    except (RuntimeError, ValueError):
        shapes = [tuple(getattr(v, "shape", ())) for v in values]
        hint = (" (DROID anchors with 1 and 2 language chunks: set data.require_full_language_chunks=true)"
                if key in ("state", "action", "images", "state_mask", "action_mask") else "")
        raise DataError(f"cannot batch field {key!r}: the samples have shapes {shapes}{hint}") from None


class DreamZeroCollator:
    """Stacks DreamZero samples and tokenizes their prompts (picklable; the tokenizer loads on first use).

    Args:
        tokenizer_path: local UMT5 tokenizer folder.
        max_length: token ids per prompt.
        num_views: camera views of the embodiment (selects agibot's multi-view template).
        literal_eval_tasks: the reference's ``ast.literal_eval`` of each task first (``data.literal_eval_tasks``).
    """

    def __init__(self, tokenizer_path: str | Path, *, max_length: int, num_views: int,
                 literal_eval_tasks: bool = False) -> None:
        self.tokenizer_path = str(tokenizer_path)
        self.max_length = int(max_length)
        self.num_views = int(num_views)
        self.literal_eval_tasks = bool(literal_eval_tasks)
        self._tokenizer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokenizer": None}

    @property
    def tokenizer(self) -> Any:
        """The tokenizer (loaded once)."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.tokenizer_path)
        return self._tokenizer

    def prompt(self, task: str, embodiment_id: int) -> str:
        """The embodiment prompt of one sample (before cleaning)."""
        if self.literal_eval_tasks:
            try:
                parsed = ast.literal_eval(task)
                task = str(parsed[0]) if isinstance(parsed, (list, tuple)) else str(parsed)
            except (ValueError, SyntaxError, TypeError):
                pass
        return prompt_for(str(task), embodiment_id, num_views=self.num_views)

    def tokenize(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, attention_mask)`` int64 ``[N, max_length]`` of cleaned ``texts``."""
        encoded = self.tokenizer([clean_text(t) for t in texts], padding="max_length", truncation=True,
                                 max_length=self.max_length, return_tensors="pt", add_special_tokens=True)
        return encoded["input_ids"].to(torch.int64), encoded["attention_mask"].to(torch.int64)

    def __call__(self, samples: Sequence[Mapping[str, Any]]) -> DreamZeroBatch:
        keys = list(samples[0])
        for i, sample in enumerate(samples[1:], start=1):
            if set(sample) != set(keys):
                raise DataError(f"sample {i} of the batch has fields {sorted(sample)}, sample 0 has {sorted(keys)}")
        batch = DreamZeroBatch()
        for key in keys:
            values = [s[key] for s in samples]
            if key == "text":
                prompts = [self.prompt(v, int(s["embodiment_id"])) for v, s in zip(values, samples, strict=True)]
                batch["text"], batch["text_attention_mask"] = self.tokenize(prompts)
            elif key == "text_negative":
                batch["text_negative"], batch["text_attention_mask_negative"] = self.tokenize(values)
            else:
                batch[key] = _stack(key, values)
        return batch
