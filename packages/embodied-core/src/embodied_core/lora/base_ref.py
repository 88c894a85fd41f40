"""The reference from an adapter checkpoint to the base weights its adapters were trained on.

A LoRA checkpoint does not copy the base model. ``lora_base.json`` records where the base came from:

- ``pretrained``: the ``--pretrained-checkpoint`` (file or folder, any layout the model's loader reads);
- ``initial``: a run without ``--pretrained-checkpoint`` trains adapters on the model's own initialisation, which
  rank 0 writes once to ``<output-dir>/lora_base/model.safetensors``;

with the size of every file, so a base that changed since training is an error instead of silently wrong outputs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import attrs
from torch import nn

from embodied_core.checkpoint.readers import read_json, read_tensors
from embodied_core.errors import CheckpointError
from embodied_core.lora.layout import BASE_FILE, INITIAL_BASE

__all__ = ["BaseReference", "initial_reference", "pretrained_reference",
           "read_lora_record", "write_initial_base", "write_lora_record"]



def _file_sizes(path: Path) -> dict[str, int]:
    if path.is_file():
        return {path.name: path.stat().st_size}
    return {str(p.relative_to(path)): p.stat().st_size for p in sorted(path.rglob("*")) if p.is_file()}


@attrs.frozen(kw_only=True)
class BaseReference:
    """Where the base weights are and what they looked like at training time.

    Attributes:
        kind: ``pretrained`` (loaded with the model's ``load_pretrained_checkpoint``) or ``initial`` (the run's own
            ``lora_base/model.safetensors``, loaded strictly by key).
        path: absolute path of the file or folder.
        files: size in bytes of each file (relative to ``path`` for a folder).
    """

    kind: Literal["pretrained", "initial"]
    path: str
    files: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``lora_base.json``."""
        return {"kind": self.kind, "path": self.path, "files": dict(self.files)}

    @classmethod
    def from_dict(cls, doc: Any, *, source: Path) -> BaseReference:
        """Reads the ``base`` entry of ``lora_base.json`` (``source`` names the file in errors)."""
        if not isinstance(doc, dict) or doc.get("kind") not in ("pretrained", "initial") \
                or not isinstance(doc.get("path"), str) or not isinstance(doc.get("files"), dict):
            raise CheckpointError(f"{source}: 'base' must hold kind (pretrained|initial), path and files")
        return cls(kind=doc["kind"], path=doc["path"], files={str(k): int(v) for k, v in doc["files"].items()})

    def check_unchanged(self, *, source: Path) -> None:
        """Raises CheckpointError when the base is gone or a file's size differs from training time."""
        path = Path(self.path)
        if not path.exists():
            raise CheckpointError(f"{source}: the base weights {path} the adapters were trained on do not exist on "
                                  "this machine; put them there (or merge the adapters where they exist: embodied "
                                  "checkpoint merge-lora)")
        now = _file_sizes(path)
        changed = sorted(name for name, size in self.files.items() if now.get(name) != size)
        if changed:
            raise CheckpointError(f"{source}: the base weights {path} changed since the adapters were trained "
                                  f"({len(changed)} file(s) differ in size or are missing: {', '.join(changed[:5])})")

    def load_into(self, model: nn.Module, *, source: Path) -> None:
        """Loads the base weights into ``model`` (before adapters are injected)."""
        self.check_unchanged(source=source)
        if self.kind == "pretrained":
            model.load_pretrained_checkpoint(self.path)
            return
        try:
            model.load_state_dict(read_tensors(Path(self.path)), strict=True)
        except RuntimeError as exc:
            raise CheckpointError(f"{self.path}: the initial base weights do not fit {type(model).__name__} (strict "
                                  f"load): {exc}") from None


def pretrained_reference(path: str | Path) -> BaseReference:
    """The reference to a ``--pretrained-checkpoint``."""
    resolved = Path(path).expanduser().resolve()
    return BaseReference(kind="pretrained", path=str(resolved), files=_file_sizes(resolved))


def initial_reference(output_dir: str | Path) -> BaseReference:
    """The reference to the initial weights written by :func:`write_initial_base` (the file must exist)."""
    path = (Path(output_dir) / INITIAL_BASE).resolve()
    return BaseReference(kind="initial", path=str(path), files=_file_sizes(path))


def write_initial_base(model: nn.Module, output_dir: str | Path) -> Path:
    """Writes the model's weights (before any adapter exists) to ``<output_dir>/lora_base/model.safetensors``."""
    from embodied_core.checkpoint.file_format import save_model_file

    target = Path(output_dir) / INITIAL_BASE
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".tmp-{os.getpid()}"
    tmp.mkdir(exist_ok=True)
    written = save_model_file(model.state_dict(), tmp, "safetensors")
    os.replace(written, target)
    tmp.rmdir()
    return target


def read_lora_record(directory: Path) -> tuple[BaseReference, dict[str, Any]]:
    """``(base reference, training settings)`` from ``directory/lora_base.json``."""
    source = Path(directory) / BASE_FILE
    doc = read_json(source)
    if not isinstance(doc, dict) or not isinstance(doc.get("training"), dict):
        raise CheckpointError(f"{source}: expected an object with 'base' and 'training'")
    return BaseReference.from_dict(doc.get("base"), source=source), doc["training"]


def write_lora_record(directory: Path, base: BaseReference, training: dict[str, Any]) -> None:
    """Writes ``directory/lora_base.json``."""
    (Path(directory) / BASE_FILE).write_text(json.dumps({"base": base.to_dict(), "training": training}, indent=2))
