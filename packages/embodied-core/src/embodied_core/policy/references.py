"""What a policy folder makes ``load_policy`` read outside itself, checked before anything is read.

A policy folder may come from someone else. The files it names - ``policy.json``'s ``stats_file`` and
``tokenizer`` entries, ``lora_base.json``'s base weights, what the model's policy class declares
(:meth:`PolicyClass.references`), and every symbolic link inside the folder - must resolve inside its boundary:
the folder itself or, for a checkpoint of a training run (``<run>/checkpoints/step_<N>`` next to
``<run>/config.yaml``), that run's output directory, since one training run wrote both. A relative ``../``
path, an absolute path or a link leading elsewhere, and a tokenizer given as a hub id, are refused with an
:class:`~embodied_core.errors.ExternalReferenceError` listing each reference and what it would read, unless the
caller allows external references (``--allow-external-references``); then each one is logged. Nothing here
downloads anything, and no loader of ours passes ``trust_remote_code``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from embodied_core.errors import ExternalReferenceError

__all__ = ["Reference", "check_references", "collect_references", "folder_boundary"]

logger = logging.getLogger("embodied.policy")

ALLOW_FLAG = "--allow-external-references"
HUB_PREFIX = "hub:"
"""A value of :meth:`PolicyClass.references` that names a hub id rather than a path starts with this."""


@attrs.frozen
class Reference:
    """One thing a policy folder makes us read.

    Attributes:
        entry: where it is recorded (``policy.json stats_file``, ``symlink tokenizer/vocab.json``, ...).
        value: the value as recorded.
        target: the path it resolves to (symbolic links followed); None for a hub id.
    """

    entry: str
    value: str
    target: Path | None

    def describe(self, boundary: Path) -> str:
        """``entry = value -> what would be read``."""
        if self.target is None:
            return (f"{self.entry} = {self.value!r}: a hub id (nothing in embodied downloads it; the model's loader "
                    "would look for it on this machine)")
        where = "outside" if not _inside(self.target, boundary) else "inside"
        return f"{self.entry} = {self.value!r} -> would read {self.target} ({where} {boundary})"


def _inside(path: Path, boundary: Path) -> bool:
    return path == boundary or path.is_relative_to(boundary)


def folder_boundary(folder: Path) -> Path:
    """The folder, or the run's output directory when ``folder`` is a checkpoint of a training run."""
    folder = Path(folder).resolve()
    run = folder.parent.parent
    if folder.parent.name == "checkpoints" and (run / "config.yaml").is_file():
        return run
    return folder


def _path_reference(entry: str, value: Any, folder: Path) -> Reference | None:
    if not isinstance(value, str) or not value:
        return None
    return Reference(entry, value, (folder / Path(value).expanduser()).resolve())


def _tokenizer_references(doc: Mapping[str, Any], folder: Path) -> list[Reference]:
    record = doc.get("tokenizer") or {}
    if not isinstance(record, Mapping):
        return []
    if record.get("files"):  # the folder's copy is read; the recorded source only says where it came from
        found = _path_reference("policy.json tokenizer.files", record["files"], folder)
        return [found] if found else []
    source = record.get("source")
    if not isinstance(source, str) or not source:
        return []
    local = Path(source).expanduser()
    if not local.is_absolute():  # PolicyFolder.tokenizer_path hands a relative source on as a hub id
        return [Reference("policy.json tokenizer.source", source, None)]
    return [Reference("policy.json tokenizer.source", source, local.resolve())]


def _lora_references(folder: Path) -> list[Reference]:
    from embodied_core.lora.base_ref import read_lora_record
    from embodied_core.lora.layout import BASE_FILE

    if not (folder / BASE_FILE).is_file():
        return []
    base, _ = read_lora_record(folder)
    return [Reference(f"{BASE_FILE} base.path", base.path, Path(base.path).expanduser().resolve())]


def _symlinks(folder: Path) -> list[Reference]:
    """Every symbolic link under ``folder`` (links are not followed while walking)."""
    found = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(root) / name
            if path.is_symlink():
                found.append(Reference(f"symlink {path.relative_to(folder)}", os.readlink(path), path.resolve()))
    return found


def collect_references(folder: Path, doc: Mapping[str, Any], *,
                       declared: Mapping[str, str] | None = None) -> list[Reference]:
    """Everything ``load_policy`` would read from ``doc``'s entries, the LoRA base, ``declared`` (the policy
    class's own, ``entry -> path``) and the links under ``folder``."""
    from embodied_core.policy.folder import STATS_FILE

    folder = Path(folder).resolve()
    refs = [r for r in [_path_reference("policy.json stats_file", doc.get("stats_file", STATS_FILE), folder)] if r]
    refs += _tokenizer_references(doc, folder)
    refs += _lora_references(folder)
    for entry, value in (declared or {}).items():
        if isinstance(value, str) and value.startswith(HUB_PREFIX):
            refs.append(Reference(entry, value.removeprefix(HUB_PREFIX), None))
            continue
        found = _path_reference(entry, value, folder)
        if found:
            refs.append(found)
    refs += _symlinks(folder)
    return refs


def check_references(folder: Path, refs: list[Reference], *, allow_external: bool) -> list[Reference]:
    """The references that leave the folder's boundary; ExternalReferenceError listing them unless allowed.

    Raises:
        ExternalReferenceError: some reference leaves the boundary and ``allow_external`` is False.
    """
    boundary = folder_boundary(folder)
    external = [r for r in refs if r.target is None or not _inside(r.target, boundary)]
    if not external:
        return []
    lines = "\n".join(f"  - {r.describe(boundary)}" for r in external)
    if not allow_external:
        raise ExternalReferenceError(
            f"{folder}: the policy folder references {len(external)} thing(s) outside {boundary}:\n{lines}\n"
            f"Refused: a folder from someone else must not make this machine read other files. If you trust it, "
            f"pass {ALLOW_FLAG} (Python: allow_external_references=True) to read exactly these.")
    logger.warning("%s: reading %d reference(s) outside %s (%s):\n%s", folder, len(external), boundary, ALLOW_FLAG,
                   lines)
    return external
