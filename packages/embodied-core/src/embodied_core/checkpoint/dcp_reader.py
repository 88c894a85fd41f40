"""Reading DCP checkpoints without running code from them.

A DCP directory holds ``.metadata`` (a pickle) and ``*.distcp`` data files whose non-tensor entries are
``torch.save`` blobs. torch's ``FileSystemReader.read_metadata`` unpickles the metadata without restriction and
its default planner loads the blobs with ``weights_only=False``: a crafted checkpoint runs arbitrary code on
load. Here:

- :func:`read_dcp_metadata` unpickles ``.metadata`` with an allowlist of DCP's metadata classes (plus
  ``torch.Size``, dtypes, layouts and paths); anything else is a CheckpointError naming the file;
- :class:`SafeFileSystemReader` is a ``FileSystemReader`` whose ``read_metadata`` is that function, and
  :class:`SafeLoadPlanner` loads non-tensor entries with ``weights_only=True``;
- every load goes through :func:`dcp_load` / :func:`load_dcp_keys` / :func:`read_dcp_state_dict`, which check
  the directory first (metadata readable, every data file present and long enough).
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import pickle
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint import metadata as dcp_metadata
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta, TensorStorageMetadata

from embodied_core.errors import CheckpointError

__all__ = ["METADATA_FILE", "SafeFileSystemReader", "SafeLoadPlanner", "check_dcp_dir", "dcp_keys", "dcp_load",
           "iter_dcp_tensors", "load_dcp_keys", "read_dcp_metadata", "read_dcp_state_dict",
           "single_process_is_intended"]

METADATA_FILE = ".metadata"

_ALLOWED_CLASSES: dict[tuple[str, str], Any] = {
    **{("torch.distributed.checkpoint.metadata", name): getattr(dcp_metadata, name)
       for name in (*dcp_metadata.__all__, "_MEM_FORMAT_ENCODING")},
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): None,  # resolved lazily (private class)
    ("torch", "Size"): torch.Size,
    ("torch.serialization", "_get_layout"): None,
    ("collections", "OrderedDict"): None,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("pathlib", "Path"): pathlib.Path,
    ("pathlib", "PosixPath"): pathlib.PosixPath,
    ("pathlib", "PurePosixPath"): pathlib.PurePosixPath,
    ("pathlib", "WindowsPath"): pathlib.WindowsPath,
    ("pathlib", "PureWindowsPath"): pathlib.PureWindowsPath,
}
"""(module, name) a DCP ``.metadata`` pickle may reference. Nothing here runs code when called with data."""


class _MetadataUnpickler(pickle.Unpickler):
    """Resolves only the allowlisted globals (and torch dtypes); refuses everything else."""

    def __init__(self, file: io.BufferedIOBase, path: Path) -> None:
        super().__init__(file)
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        if (module, name) in _ALLOWED_CLASSES:
            found = _ALLOWED_CLASSES[(module, name)]
            return found if found is not None else super().find_class(module, name)
        raise CheckpointError(f"{self._path}: refused: the DCP metadata references {module}.{name}, which is not "
                              "a DCP metadata class (a crafted or foreign file); nothing from it was run")

    def persistent_load(self, pid: Any) -> Any:
        raise CheckpointError(f"{self._path}: refused: the DCP metadata uses persistent ids, which DCP never writes")


def read_dcp_metadata(directory: str | Path, *, rank: int | None = None) -> Metadata:
    """The ``Metadata`` of a DCP directory, unpickled with the allowlist of DCP's own classes.

    Raises:
        CheckpointError: naming the file when it is missing, truncated, not DCP metadata, or references
            anything outside the allowlist (then nothing from the file was executed).
    """
    path = Path(directory) / (METADATA_FILE if rank is None else f"__{rank}{METADATA_FILE}")
    if not path.is_file():
        raise CheckpointError(f"{path}: file is missing ({Path(directory)} is not a complete DCP checkpoint)")
    try:
        with path.open("rb") as handle:
            metadata = _MetadataUnpickler(handle, path).load()
    except CheckpointError:
        raise
    except Exception as exc:  # truncated or garbage pickle
        raise CheckpointError(f"{path}: not readable DCP metadata (truncated or corrupt): "
                              f"{type(exc).__name__}: {exc}") from None
    if not isinstance(metadata, Metadata):
        raise CheckpointError(f"{path}: holds a {type(metadata).__name__}, not DCP Metadata")
    return metadata


def check_dcp_dir(directory: str | Path) -> Metadata:
    """Reads the metadata safely and checks that every data file it names is present and long enough.

    Returns the metadata. Raises CheckpointError naming the first missing, truncated or out-of-place file.
    """
    directory = Path(directory)
    metadata = read_dcp_metadata(directory)
    needed: dict[str, int] = {}
    for info in (metadata.storage_data or {}).values():
        name = getattr(info, "relative_path", None)
        offset, length = getattr(info, "offset", None), getattr(info, "length", None)
        if not isinstance(name, str) or not isinstance(offset, int) or not isinstance(length, int):
            raise CheckpointError(f"{directory / METADATA_FILE}: malformed storage entry {info!r}")
        if Path(name).name != name or name in ("", ".", ".."):
            raise CheckpointError(f"{directory / METADATA_FILE}: refused: storage entry points outside the "
                                  f"checkpoint directory ({name!r})")
        needed[name] = max(needed.get(name, 0), offset + length)
    for name, size in sorted(needed.items()):
        file = directory / name
        if not file.is_file():
            raise CheckpointError(f"{file}: file is missing (named by {directory / METADATA_FILE})")
        actual = file.stat().st_size
        if actual < size:
            raise CheckpointError(f"{file}: truncated ({actual} bytes, the metadata needs {size})")
    return metadata


def dcp_keys(directory: str | Path) -> set[str]:
    """Flattened keys stored in a DCP directory (reads only its metadata, safely)."""
    return set(read_dcp_metadata(directory).state_dict_metadata)


class SafeFileSystemReader(FileSystemReader):
    """``FileSystemReader`` whose metadata is unpickled by :func:`read_dcp_metadata` (allowlist only)."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        """The checkpoint's metadata, read without running code from it."""
        metadata = read_dcp_metadata(Path(self.path), rank=kwargs.get("rank"))
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


def _load_blob(value: io.BytesIO, fqn: str, file: str) -> Any:
    try:
        return torch.load(value, map_location="cpu", weights_only=True)
    except Exception as exc:
        first = str(exc).strip().split(". ")[0]
        raise CheckpointError(f"{file}: entry {fqn!r} refused or unreadable with weights_only=True (a crafted or "
                              f"corrupt data file; nothing from it was run): {type(exc).__name__}: {first}") from None


class SafeLoadPlanner(DefaultLoadPlanner):
    """``DefaultLoadPlanner`` that loads non-tensor entries with ``weights_only=True`` (torch's uses False)."""

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        """Stores one non-tensor entry, unpickled without code."""
        fqn = read_item.dest_index.fqn
        info = (getattr(self.metadata, "storage_data", None) or {}).get(read_item.storage_index)
        loaded = _load_blob(value, fqn, getattr(info, "relative_path", "a .distcp file"))
        if self.flatten_state_dict:
            from torch.distributed.checkpoint._nested_dict import set_element

            set_element(self.original_state_dict, self.mappings[fqn], loaded)
        else:  # state_dict may be a copy of the flat dict the caller passed: fill both
            self.original_state_dict[fqn] = loaded
            self.state_dict[fqn] = loaded


@contextlib.contextmanager
def single_process_is_intended() -> Iterator[None]:
    """Silences DCP's warning that it runs without a process group: one process is a supported mode."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(disabled|unavailable).*uninitialized.*")
        yield


def _wrap_failure(directory: Path, exc: BaseException) -> CheckpointError:
    """One CheckpointError naming ``directory`` (DCP wraps each rank's error in a CheckpointException)."""
    failures = getattr(exc, "failures", None)
    if isinstance(exc, CheckpointException) and failures:
        rank, (inner, _) = sorted(failures.items())[0]
        wrapped = _wrap_failure(directory, inner)
        return CheckpointError(f"{wrapped} (rank {rank})") if len(failures) > 1 or rank else wrapped
    if isinstance(exc, CheckpointError):
        return exc if str(directory) in str(exc) else CheckpointError(f"{directory}: {exc}")
    first = str(exc).strip().splitlines()
    return CheckpointError(f"{directory}: DCP load failed: {type(exc).__name__}: {first[0] if first else ''}")


def dcp_load(state: dict[str, Any], directory: str | Path, *, process_group: Any = None,
             no_dist: bool = False) -> None:
    """``dcp.load`` of ``state`` (in place) from ``directory`` through the safe reader and planner.

    The directory is checked first (:func:`check_dcp_dir`); failures are CheckpointErrors naming it.
    """
    directory = Path(directory)
    check_dcp_dir(directory)
    try:
        with single_process_is_intended():
            dcp.load(state, storage_reader=SafeFileSystemReader(str(directory)), planner=SafeLoadPlanner(),
                     process_group=process_group, no_dist=no_dist)
    except (Exception, CheckpointException) as exc:
        raise _wrap_failure(directory, exc) from None


def _selected(fqn: str, path: tuple[Any, ...] | None, keys: set[str] | None) -> bool:
    if keys is None:
        return True
    if fqn in keys:
        return True
    parts = [str(p) for p in (path or (fqn,))]
    return any(".".join(parts[: i + 1]) in keys for i in range(len(parts)))


def _nest(flat: dict[str, Any], planner_data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fqn, value in flat.items():
        path = planner_data.get(fqn) or (fqn,)
        node: Any = out
        for i, part in enumerate(path[:-1]):
            nxt = path[i + 1]
            if isinstance(node, list):
                while len(node) <= part:
                    node.append(None)
                if node[part] is None:
                    node[part] = [] if isinstance(nxt, int) else {}
                node = node[part]
            else:
                node = node.setdefault(part, [] if isinstance(nxt, int) else {})
        last = path[-1]
        if isinstance(node, list):
            while len(node) <= last:
                node.append(None)
            node[last] = value
        else:
            node[last] = value
    return out


def load_dcp_keys(directory: str | Path, keys: Iterable[str] | None, *, process_group: Any = None,
                  no_dist: bool = False) -> dict[str, Any]:
    """Reads ``keys`` (flattened keys or prefixes of them, e.g. ``"model"``, ``"rank_state.rank0"``) into a
    fresh nested dict of CPU tensors and plain values; ``None`` reads everything.

    Collective under an initialized process group (every rank calls it), unless ``no_dist``.
    """
    directory = Path(directory)
    metadata = check_dcp_dir(directory)
    planner_data = metadata.planner_data or {}
    wanted = None if keys is None else set(keys)
    flat: dict[str, Any] = {}
    for fqn, md in metadata.state_dict_metadata.items():
        if _selected(fqn, planner_data.get(fqn), wanted):
            flat[fqn] = torch.empty(md.size, dtype=md.properties.dtype) if isinstance(md, TensorStorageMetadata) \
                else None
    if not flat:
        return {}
    try:
        with single_process_is_intended():
            dcp.load(flat, storage_reader=SafeFileSystemReader(str(directory)),
                     planner=SafeLoadPlanner(flatten_state_dict=False), process_group=process_group,
                     no_dist=no_dist)
    except (Exception, CheckpointException) as exc:
        raise _wrap_failure(directory, exc) from None
    return _nest(flat, planner_data)


def read_dcp_state_dict(directory: str | Path, keys: Iterable[str] | None = None) -> dict[str, Any]:
    """Gathers a DCP checkpoint into full CPU tensors in this process alone (no collectives).

    ``directory`` is a ``dcp/`` folder or a checkpoint ``step_<N>`` holding one. ``keys`` as in
    :func:`load_dcp_keys` (e.g. ``{"model"}`` for the weights: ``result["model"]`` is ``fqn -> tensor``).
    Never runs code from the checkpoint; failures are CheckpointErrors naming the file.
    """
    directory = Path(directory)
    if not (directory / METADATA_FILE).is_file() and (directory / "dcp" / METADATA_FILE).is_file():
        directory = directory / "dcp"
    return load_dcp_keys(directory, keys, no_dist=True)


def iter_dcp_tensors(directory: str | Path, prefix: str = "model", *,
                     max_bytes: int = 256 * 2**20) -> Iterator[tuple[str, torch.Tensor]]:
    """Yields ``(key, full CPU tensor)`` for the tensors stored under ``prefix.`` (the key without it), reading at
    most about ``max_bytes`` at a time in this process alone: streaming a DCP checkpoint into a (sharded) model
    never holds all of it. Same guarantees as :func:`read_dcp_state_dict` (nothing from the checkpoint runs)."""
    directory = Path(directory)
    if not (directory / METADATA_FILE).is_file() and (directory / "dcp" / METADATA_FILE).is_file():
        directory = directory / "dcp"
    metadata = check_dcp_dir(directory)
    head = prefix + "."
    sizes = {fqn: md.size.numel() * md.properties.dtype.itemsize for fqn, md in metadata.state_dict_metadata.items()
             if fqn.startswith(head) and isinstance(md, TensorStorageMetadata)}
    batch: list[str] = []
    for fqn in [*sorted(sizes), None]:
        if batch and (fqn is None or sum(sizes[k] for k in batch) + sizes[fqn] > max_bytes):
            loaded = load_dcp_keys(directory, batch, no_dist=True).get(prefix, {})
            for key in batch:
                yield key[len(head):], loaded.pop(key[len(head):])
            batch = []
        if fqn is not None:
            batch.append(fqn)
