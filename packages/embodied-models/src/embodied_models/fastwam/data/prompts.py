"""FastWAM prompts and the names of their text-cache files (no torch: the strategy checks the cache with these).

A task becomes the prompt ``data.prompt_template`` (default ``"A video recorded from a robot's point of view executing
the following instruction: {task}"``, lerobot's ``prompt_template``) unless it already starts with ``"A video
recorded"`` (LoongForge's rule). Its UMT5 embedding is cached as
``{sha256(prompt)}.t5_len{text_len}.{encoder_id}.pt``; a file named ``{sha1(prompt)}.pt`` (the older naming) is
read when the new name is absent.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

from embodied_core.errors import DataError

__all__ = ["INDEX_NAME", "PRECOMPUTE_COMMAND", "PROMPT_TEMPLATE", "cache_file_name", "encoder_id_from_model_id",
           "find_cache_file", "format_prompt", "legacy_file_name", "missing_prompts_error", "precompute_hint",
           "template_problems"]

PROMPT_TEMPLATE = "A video recorded from a robot's point of view executing the following instruction: {task}"
_FORMATTED_PREFIX = "A video recorded"
INDEX_NAME = "INDEX.json"
PRECOMPUTE_COMMAND = "embodied data precompute-text"


def format_prompt(task: str, template: str = PROMPT_TEMPLATE) -> str:
    """The prompt of a task in ``template`` (its one field is ``{task}``); a task that already reads "A video
    recorded ..." is kept as it is."""
    task = str(task)
    return task if task.startswith(_FORMATTED_PREFIX) else template.format(task=task)


def template_problems(template: str, where: str) -> list[str]:
    """Why ``template`` is not a prompt template (exactly the field ``{task}``), naming ``where`` it was set."""
    import string

    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return [f"{where}={template!r} is not a format string ({exc})"]
    if fields != ["task"]:
        return [f"{where}={template!r} must contain the field {{task}} exactly once and no other field (it has "
                f"{fields or 'none'})"]
    return []


def encoder_id_from_model_id(model_id: str) -> str:
    """``Wan-AI/Wan2.2-TI2V-5B`` -> ``wan22ti2v5b``: lowercase alphanumerics of the id's last part."""
    return re.sub(r"[^a-z0-9]+", "", str(model_id).split("/")[-1].lower()) or "textenc"


def cache_file_name(prompt: str, *, text_len: int, encoder_id: str) -> str:
    """``{sha256(prompt)}.t5_len{text_len}.{encoder_id}.pt``."""
    return f"{hashlib.sha256(prompt.encode('utf-8')).hexdigest()}.t5_len{text_len}.{encoder_id}.pt"


def legacy_file_name(prompt: str) -> str:
    """``{sha1(prompt)}.pt`` (the older naming, read as a fallback)."""
    return f"{hashlib.sha1(prompt.encode('utf-8')).hexdigest()}.pt"


def find_cache_file(cache_dir: Path, prompt: str, *, text_len: int, encoder_id: str) -> Path | None:
    """The cache file of ``prompt`` (the current name, else the legacy one), None when neither exists."""
    path = cache_dir / cache_file_name(prompt, text_len=text_len, encoder_id=encoder_id)
    if path.is_file():
        return path
    legacy = cache_dir / legacy_file_name(prompt)
    return legacy if legacy.is_file() else None


def precompute_hint(dataset: str | Path | None, cache_dir: str | Path | None, *, text_len: int,
                    encoder_id: str) -> str:
    """The command line that fills the cache."""
    return (f"{PRECOMPUTE_COMMAND} {dataset or '<dataset>'} --text-encoder-path <UMT5 folder> --out "
            f"{cache_dir or '<cache dir>'} --text-len {text_len} --encoder-id {encoder_id}")


def missing_prompts_error(prompts: Iterable[str], *, cache_dir: str | Path | None, dataset: str | Path | None,
                          text_len: int, encoder_id: str) -> DataError:
    """A DataError naming the prompts without a cache entry (or the unset folder) and the command that makes them."""
    prompts = list(prompts)
    shown = "; ".join(repr(p) for p in prompts[:5]) + (f" (and {len(prompts) - 5} more)" if len(prompts) > 5 else "")
    hint = precompute_hint(dataset, cache_dir, text_len=text_len, encoder_id=encoder_id)
    if cache_dir is None:
        return DataError(f"data.text_cache_dir is unset, so there is no UMT5 embedding for the prompt(s) {shown}; "
                         f"precompute them with: {hint}, then set data.text_cache_dir=<cache dir>")
    names = ", ".join(cache_file_name(p, text_len=text_len, encoder_id=encoder_id) for p in prompts[:2])
    return DataError(f"{cache_dir}: no UMT5 embedding (t5_len{text_len}, encoder {encoder_id}) for {len(prompts)} "
                     f"prompt(s): {shown} (expected e.g. {names}); precompute them with: {hint}")
