"""``--pretrained-checkpoint``: where the weights are, reading them safely, and the generic strict loader.

Accepted sources (:func:`resolve_weights`): a weights file (``.safetensors``, or ``.pt``/``.pth``/``.bin``
read with ``weights_only=True``), a sharded safetensors index (``*.safetensors.index.json``), a folder
holding ``model.safetensors`` / ``model.safetensors.index.json`` / ``model.pt`` / ``pytorch_model.bin``
(also under ``pretrained_model/``, lerobot's layout), a DCP checkpoint (``step_N`` with ``dcp/``, or the
``dcp/`` folder; gathered in this process), a run's ``--output-dir`` or ``checkpoints`` folder (its newest
complete checkpoint), or a folder with exactly one weights file.

Model plugins read through the same resolver and load through their own :class:`KeyMap`
(:func:`embodied_core.checkpoint.keymap.load_state`); :func:`load_pretrained` is the identity-map case.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import torch
from torch import nn

from embodied_core.checkpoint.keymap import IDENTITY, KeyMap, LoadReport, load_state
from embodied_core.checkpoint.layout import MODEL_PT, MODEL_SAFETENSORS, checkpoints_root, find_latest
from embodied_core.checkpoint.readers import TORCH_SUFFIXES, iter_tensors, read_json
from embodied_core.errors import CheckpointError

__all__ = ["LoadReport", "WeightSource", "load_pretrained", "read_state_dict", "resolve_weights"]

INDEX_SUFFIX = ".safetensors.index.json"
_FOLDER_FILES = ("model.safetensors.index.json", MODEL_SAFETENSORS, MODEL_PT, "pytorch_model.bin")
_DCP_METADATA = ".metadata"


def _is_weights_file(path: Path) -> bool:
    return path.suffix in (".safetensors", *TORCH_SUFFIXES) or path.name.endswith(INDEX_SUFFIX)


@attrs.frozen
class WeightSource:
    """Resolved weights: the files to read, or a DCP directory to gather.

    Attributes:
        location: what the resolution found (a file, an index, a DCP directory); named in messages.
        files: weight files in reading order (empty for DCP).
        dcp_dir: the DCP directory (``.metadata`` inside), or None.
    """

    location: Path
    files: tuple[Path, ...] = ()
    dcp_dir: Path | None = None

    def items(self) -> Iterator[tuple[str, torch.Tensor]]:
        """``(key, tensor)`` pairs, a tensor at a time for safetensors files and a bounded batch at a time for DCP;
        nothing here runs code."""
        if self.dcp_dir is not None:
            from embodied_core.checkpoint.dcp_reader import iter_dcp_tensors

            empty = True
            for item in iter_dcp_tensors(self.dcp_dir, "model"):  # a bounded batch of tensors at a time
                empty = False
                yield item
            if empty:
                raise CheckpointError(f"{self.dcp_dir}: the DCP checkpoint holds no model weights")
            return
        for file in self.files:
            yield from iter_tensors(file)

    def __str__(self) -> str:
        return str(self.location)


def _index_shards(index: Path) -> WeightSource:
    doc = read_json(index)
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index}: not a safetensors index (needs a 'weight_map' of key -> shard file)")
    files = tuple(sorted({index.parent / name for name in weight_map.values()}))
    absent = [str(f) for f in files if not f.is_file()]
    if absent:
        raise CheckpointError(f"{index} names shard(s) that do not exist: {', '.join(absent)}")
    return WeightSource(location=index, files=files)


def _file_source(path: Path) -> WeightSource:
    if path.name.endswith(INDEX_SUFFIX):
        return _index_shards(path)
    if not _is_weights_file(path):
        raise CheckpointError(f"{path}: not a weights file (expected .safetensors, {INDEX_SUFFIX}, "
                              f"{', '.join(TORCH_SUFFIXES)})")
    return WeightSource(location=path, files=(path,))


def resolve_weights(path: str | Path) -> WeightSource:
    """The weights that ``path`` designates (see the module doc); CheckpointError naming ``path`` if none."""
    path = Path(path)
    if path.is_file():
        return _file_source(path)
    if not path.is_dir():
        raise CheckpointError(f"pretrained checkpoint {path}: no such file or directory")
    for folder in (path, path / "pretrained_model"):
        for name in _FOLDER_FILES:
            if (folder / name).is_file():
                return _file_source(folder / name)
    for dcp_dir in (path / "dcp", path):
        if (dcp_dir / _DCP_METADATA).is_file():
            return WeightSource(location=dcp_dir, dcp_dir=dcp_dir)
    for root in (path, checkpoints_root(path)):
        latest = find_latest(root)
        if latest is not None:
            return resolve_weights(latest)
    files = sorted(p for p in path.iterdir() if p.is_file() and _is_weights_file(p))
    if len(files) == 1:
        return _file_source(files[0])
    if len(files) > 1:
        raise CheckpointError(f"pretrained checkpoint {path}: cannot tell which weights to load "
                              f"({', '.join(p.name for p in files)}); name the file")
    raise CheckpointError(f"pretrained checkpoint {path}: found no model.safetensors, model.safetensors.index.json, "
                          "model.pt or pytorch_model.bin (also looked in pretrained_model/, dcp/ and checkpoints/)")


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The whole state dict of a weights source (any of :func:`resolve_weights`'s), read without running code."""
    return dict(resolve_weights(path).items())


def load_pretrained(model: nn.Module, path: str | Path, keymap: KeyMap = IDENTITY) -> LoadReport:
    """Loads weights strictly into ``model`` (cast to each tensor's dtype) and returns the report.

    Raises:
        CheckpointError: the source cannot be found or read (naming the file), or any key is missing,
            unexpected or of another shape (all differences listed).
    """
    source = resolve_weights(path)
    return load_state(model, source.items(), keymap, source=source)
