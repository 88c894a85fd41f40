"""``embodied data precompute-text``: UMT5 embeddings of a dataset's FastWAM prompts (the ``fastwam`` text cache).

``embodied data precompute-text DATASET [DATASET ...] --text-encoder-path DIR --out DIR [--text-len L]
[--encoder-id ID]`` collects the tasks of each LeRobot dataset (``meta/tasks.jsonl`` for v2.x, ``meta/tasks.parquet``
for v3.0), formats them as FastWAM prompts, and writes one entry per prompt (:mod:`.text_cache`, named as in
:mod:`.prompts`). ``DIR`` is a folder holding a UMT5 encoder (``config.json`` + weights, as transformers'
``UMT5EncoderModel`` saves it) and its tokenizer, or a Wan base folder with ``text_encoder/`` and ``tokenizer/``.

Resumable: entries that exist and read back valid are skipped, and every file is written to a temporary name and
renamed. Parallel over ranks: under ``torchrun`` (RANK / WORLD_SIZE, or ``--rank`` / ``--world-size``) rank r
encodes prompts r, r + W, ...; rank 0 also writes ``INDEX.json``. No process group is needed.
Encoding: :mod:`embodied_models.wan.text` (cleaned prompt, ``</s>`` appended, padded / truncated to ``text_len``;
the encoder's last hidden state, zero past the prompt's tokens).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from embodied_core.errors import DataError, UsageError
from embodied_models.fastwam.data.prompts import (
    PRECOMPUTE_COMMAND,
    PROMPT_TEMPLATE,
    cache_file_name,
    format_prompt,
    template_problems,
)
from embodied_models.fastwam.data.text_cache import read_entry, update_index, write_entry

__all__ = ["PrecomputeTextResult", "collect_prompts", "main", "precompute_text"]

logger = logging.getLogger("embodied.fastwam.precompute_text")


@attrs.frozen
class PrecomputeTextResult:
    """What one rank did (prompts it encoded / found valid in the cache)."""

    encoded: tuple[str, ...]
    skipped: tuple[str, ...]
    cache: Path


def collect_prompts(datasets: Sequence[str | Path], extra: Sequence[str] = (), *,
                    template: str = PROMPT_TEMPLATE) -> dict[str, str]:
    """``prompt -> task`` for every task of ``datasets`` (v2.x tasks.jsonl, v3.0 tasks.parquet) and ``extra``
    tasks, in order, without duplicates; prompts in ``template`` (``data.prompt_template``)."""
    from embodied_data.lerobot.metadata import LeRobotMeta

    prompts: dict[str, str] = {}
    for root in datasets:
        meta = LeRobotMeta.load(root)
        if not meta.tasks:
            raise DataError(f"{meta.root}: the dataset declares no tasks (meta/tasks.jsonl or meta/tasks.parquet)")
        for _, task in sorted(meta.tasks.items()):
            prompts.setdefault(format_prompt(task, template), task)
    for task in extra:
        prompts.setdefault(format_prompt(task, template), task)
    return prompts


def _folders(path: Path) -> tuple[Path, Path]:
    """(encoder folder, tokenizer folder) of ``--text-encoder-path``."""
    if (path / "text_encoder" / "config.json").is_file():
        return path / "text_encoder", path / "tokenizer" if (path / "tokenizer").is_dir() else path
    if (path / "config.json").is_file():
        return path, path
    raise UsageError(f"--text-encoder-path {path}: no UMT5 encoder there (expected config.json + weights, or a Wan "
                     "base folder with text_encoder/ and tokenizer/)")


class _Encoder:
    """The shared Wan UMT5 encoder (:class:`embodied_models.wan.text.UMT5TextEncoder`), loaded on first use."""

    def __init__(self, path: Path, *, text_len: int, device: torch.device, dtype: torch.dtype) -> None:
        from transformers import AutoConfig

        self.encoder_dir, self.tokenizer_dir = _folders(path)
        self.text_dim = int(AutoConfig.from_pretrained(str(self.encoder_dir)).d_model)
        self.text_len, self.device, self.dtype = text_len, device, dtype
        self._umt5: Any = None

    def __call__(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        from embodied_models.wan.text import UMT5TextEncoder, clean_prompt

        if self._umt5 is None:
            self._umt5 = UMT5TextEncoder.from_folders(self.encoder_dir, self.tokenizer_dir, dtype=self.dtype,
                                                      device=self.device)
        context, mask = self._umt5(prompts, text_len=self.text_len)
        ids = self._umt5.tokenizer([clean_prompt(p) for p in prompts], padding="max_length", max_length=self.text_len,
                                   truncation=True, add_special_tokens=True, return_tensors="pt").input_ids
        return context.float().cpu(), mask.cpu(), ids


def _valid(path: Path, prompt: str, *, text_len: int, text_dim: int) -> bool:
    if not path.is_file():
        return False
    try:
        read_entry(path, prompt=prompt, text_len=text_len, text_dim=text_dim)
    except DataError as exc:
        logger.warning("re-encoding %s: %s", path.name, exc)
        return False
    return True


def precompute_text(datasets: Sequence[str | Path], *, text_encoder_path: str | Path, out: str | Path,
                    text_len: int = 128, encoder_id: str = "wan22ti2v5b", prompts: Sequence[str] = (), rank: int = 0,
                    world_size: int = 1, batch_size: int = 8, device: str | torch.device | None = None,
                    dtype: torch.dtype = torch.bfloat16, prompt_template: str = PROMPT_TEMPLATE
                    ) -> PrecomputeTextResult:
    """Builds (or completes) the text cache ``out`` for ``datasets``; see the module docstring.

    Args:
        datasets: LeRobot dataset directories whose tasks are encoded.
        text_encoder_path: UMT5 folder (or a Wan base folder with ``text_encoder/`` and ``tokenizer/``).
        out: the cache folder (``data.text_cache_dir`` of the training run).
        text_len: tokens per prompt (``data.text_len``).
        encoder_id: the encoder id in the file names (``data.encoder_id``).
        prompts: extra tasks to encode (e.g. the instructions a deployed policy will get).
        rank, world_size: this process's share of the prompts.
        batch_size: prompts per encoder call.
        device, dtype: where and in which dtype UMT5 runs (entries are stored as float32).
        prompt_template: the prompt of a task (``data.prompt_template``).
    """
    if not 0 <= rank < world_size:
        raise UsageError(f"--rank {rank} is not in [0, --world-size {world_size})")
    if text_len < 1 or batch_size < 1:
        raise UsageError(f"--text-len ({text_len}) and --batch-size ({batch_size}) must be >= 1")
    if not re.fullmatch(r"[a-z0-9]+", encoder_id):
        raise UsageError(f"--encoder-id {encoder_id!r}: lowercase letters and digits only (part of the file names)")
    problems = template_problems(prompt_template, "--prompt-template")
    if problems:
        raise UsageError(problems[0])
    path = Path(text_encoder_path)
    if not path.is_dir():
        raise UsageError(f"--text-encoder-path {path}: not a folder")
    wanted = collect_prompts(datasets, prompts, template=prompt_template)
    cache = Path(out)
    cache.mkdir(parents=True, exist_ok=True)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    encoder = _Encoder(path, text_len=text_len, device=device, dtype=dtype)
    if rank == 0:
        update_index(cache, {p: {"file": cache_file_name(p, text_len=text_len, encoder_id=encoder_id), "task": task,
                                 "text_len": text_len, "encoder_id": encoder_id} for p, task in wanted.items()})
    mine = list(wanted)[rank::world_size]
    target = {p: cache / cache_file_name(p, text_len=text_len, encoder_id=encoder_id) for p in mine}
    skipped = [p for p in mine if _valid(target[p], p, text_len=text_len, text_dim=encoder.text_dim)]
    pending = [p for p in mine if p not in skipped]
    for start in range(0, len(pending), batch_size):
        chunk = pending[start:start + batch_size]
        context, mask, ids = encoder(chunk)
        for i, prompt in enumerate(chunk):
            write_entry(target[prompt], prompt=prompt, context=context[i], mask=mask[i], input_ids=ids[i],
                        encoder_id=encoder_id)
        logger.info("rank %d: encoded %d/%d prompt(s)", rank, start + len(chunk), len(pending))
    return PrecomputeTextResult(encoded=tuple(pending), skipped=tuple(skipped), cache=cache)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PRECOMPUTE_COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", metavar="DATASET", help="LeRobot dataset directory (v2.x or v3.0)")
    parser.add_argument("--text-encoder-path", required=True,
                        help="UMT5 encoder folder with its tokenizer, or a Wan base folder with text_encoder/ and "
                        "tokenizer/")
    parser.add_argument("--out", required=True, help="cache folder (the training run's data.text_cache_dir)")
    parser.add_argument("--text-len", type=int, default=128, help="tokens per prompt, = data.text_len (default 128)")
    parser.add_argument("--encoder-id", default="wan22ti2v5b",
                        help="encoder id in the file names, = data.encoder_id (default wan22ti2v5b)")
    parser.add_argument("--prompt", action="append", default=[], help="an extra task to encode (repeatable)")
    parser.add_argument("--prompt-template", default=PROMPT_TEMPLATE,
                        help="prompt of a task, = data.prompt_template (default: FastWAM's)")
    parser.add_argument("--batch-size", type=int, default=8, help="prompts per encoder call")
    parser.add_argument("--device", help="cuda, cuda:1, cpu (default: cuda:LOCAL_RANK when available)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"], help="encoder dtype")
    parser.add_argument("--rank", type=int, default=int(os.environ.get("RANK", "0")))
    parser.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", "1")))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (``embodied data precompute-text``); returns the exit code."""
    from embodied_core.cli import run_guarded

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))

    def run() -> int:
        device = args.device
        if device is None and torch.cuda.is_available():
            device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}"
        result = precompute_text(args.datasets, text_encoder_path=args.text_encoder_path, out=args.out,
                                 text_len=args.text_len, encoder_id=args.encoder_id, prompts=args.prompt,
                                 rank=args.rank, world_size=args.world_size, batch_size=args.batch_size,
                                 device=device, dtype=getattr(torch, args.dtype),
                                 prompt_template=args.prompt_template)
        print(f"rank {args.rank}/{args.world_size}: encoded {len(result.encoded)} prompt(s), skipped "
              f"{len(result.skipped)} already cached, cache {result.cache}")
        return 0

    return run_guarded(PRECOMPUTE_COMMAND, run)


if __name__ == "__main__":
    sys.exit(main())
