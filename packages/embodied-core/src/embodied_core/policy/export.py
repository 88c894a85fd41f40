"""The inference-only policy folder (``embodied checkpoint export SRC DST``).

Copies what ``load_policy`` reads - weights as ``model.safetensors`` (from safetensors, pt or a gathered DCP
checkpoint), ``policy.json``, ``stats.safetensors``, ``tokenizer/``, ``assets/`` - and a ``meta.json`` with the
step, and leaves out optimizer, scheduler, RNG and data state. The folder is written under a temporary name and
renamed when complete. It lives in core, so it works without embodied-dist installed (Python API); the CLI
command sits with the other checkpoint tools in embodied-dist.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from embodied_core.checkpoint.layout import META_FILE, MODEL_SAFETENSORS
from embodied_core.config.provenance import embodied_versions
from embodied_core.errors import UsageError
from embodied_core.policy.folder import (
    ASSETS_DIR,
    POLICY_FILE,
    STATS_FILE,
    folder_size,
    read_policy_doc,
    resolve_policy_dir,
)
from embodied_core.policy.load import checkpoint_step, read_weights

if TYPE_CHECKING:
    import torch

__all__ = ["ExportResult", "check_destination", "export_policy", "write_policy_folder"]


@attrs.frozen
class ExportResult:
    """What :func:`export_policy` wrote."""

    source: Path
    destination: Path
    step: int | None
    num_tensors: int
    num_bytes: int


def check_destination(dst: Path) -> None:
    """UsageError when ``dst`` exists and is not an empty directory."""
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise UsageError(f"destination {dst} exists and is not an empty directory; choose a new path")


_COPIED_REFERENCES = ("policy.json stats_file", "policy.json tokenizer.files", "symlink ")
"""The references an export reads (it copies them); the others are recorded, not read."""


def export_policy(src: str | Path, dst: str | Path, *, allow_external_references: bool = False) -> ExportResult:
    """Writes the inference-only folder of the checkpoint ``src`` to ``dst``.

    Args:
        src: a checkpoint directory, a run's ``--output-dir`` (its newest checkpoint) or an exported folder.
        dst: a new (or empty) directory.
        allow_external_references: copy files the folder references outside itself (``../`` paths, absolute
            paths, links); refused by default (see :mod:`embodied_core.policy.references`).

    Raises:
        UsageError: ``dst`` exists and is not empty; ExternalReferenceError for references outside ``src``.
        CheckpointError: ``src`` is not a complete policy folder or its weights cannot be read.
    """
    from embodied_core.policy.references import check_references, collect_references

    dst = Path(dst)
    check_destination(dst)
    folder = resolve_policy_dir(src).resolve()
    doc = read_policy_doc(folder)
    copied = [r for r in collect_references(folder, doc) if r.entry.startswith(_COPIED_REFERENCES)]
    check_references(folder, copied, allow_external=allow_external_references)
    step = checkpoint_step(folder, doc)
    weights = read_weights(folder)
    write_policy_folder(folder, doc, weights, dst, step=step, record={"exported_from": str(folder)})
    return ExportResult(source=folder, destination=dst, step=step, num_tensors=len(weights),
                        num_bytes=folder_size(dst / MODEL_SAFETENSORS))


def write_policy_folder(folder: Path, doc: dict[str, Any], weights: dict[str, torch.Tensor], dst: Path, *,
                        step: int | None, record: dict[str, Any]) -> None:
    """Writes ``weights`` as ``model.safetensors`` and the policy files of ``folder`` (its ``doc``) to ``dst``,
    under a temporary name renamed when complete; ``record`` (where the folder came from) goes into ``policy.json``
    and ``meta.json``. ``dst`` must not exist or be empty (checked by the caller). A full disk or a read-only
    destination is a :class:`~embodied_core.storage.StorageError` naming ``dst`` and the bytes needed; nothing is
    left behind."""
    from embodied_core.storage import guard_write

    tokenizer = (doc.get("tokenizer") or {}).get("files")
    copied = [folder / doc.get("stats_file", STATS_FILE), folder / ASSETS_DIR]
    copied += [folder / tokenizer] if tokenizer else []
    needed = (sum(t.numel() * t.element_size() for t in weights.values())
              + sum(folder_size(p) for p in copied if p.exists()))
    with guard_write(dst, what="the policy folder", needed_bytes=needed, after=f"{folder} is unchanged"):
        _write_policy_folder(folder, doc, weights, dst, step=step, record=record)


def _write_policy_folder(folder: Path, doc: dict[str, Any], weights: dict[str, torch.Tensor], dst: Path, *,
                         step: int | None, record: dict[str, Any]) -> None:
    from embodied_core.checkpoint.checkpointer import save_model_file

    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.parent / f".tmp-export-{dst.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        save_model_file(weights, tmp, "safetensors")
        shutil.copy2(folder / doc.get("stats_file", STATS_FILE), tmp / STATS_FILE)
        tokenizer = (doc.get("tokenizer") or {}).get("files")
        if tokenizer:
            shutil.copytree(folder / tokenizer, tmp / tokenizer)
        if (folder / ASSETS_DIR).is_dir():
            shutil.copytree(folder / ASSETS_DIR, tmp / ASSETS_DIR)
        exported = {**doc, "stats_file": STATS_FILE, "step": step, **record}
        (tmp / POLICY_FILE).write_text(json.dumps(exported, indent=2))
        meta = {"step": step, "format": "safetensors", "world_size": 1, "training_state": False,
                **record, "versions": embodied_versions()}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
        if dst.exists():
            dst.rmdir()  # empty (checked above)
        tmp.rename(dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
