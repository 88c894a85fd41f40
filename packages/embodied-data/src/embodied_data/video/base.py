"""The video backend contract: decode the frames shown at given timestamps of a file, as uint8 ``[N, C, H, W]``.

A backend keeps its open decoders in a bounded LRU cache keyed by file path. The cache belongs to the process
that opened the decoders: it is dropped when the backend is pickled (DataLoader workers with ``spawn``) or
used from a forked child, so every worker opens its own decoders lazily on first use and then reuses them.

A backend imports its decoder modules (``preload_modules``) when it is built and when it is unpickled, not on
the first decode: built in the main process, they are already imported in every forked DataLoader worker
(torchcodec pulls in ``torch._dynamo``, seconds per worker under load); a spawned worker imports them once, when
it unpickles the dataset, and keeps them for every epoch (the loader's workers persist).

Each backend declares the codecs it has no decoder for. The codec is probed from the file (never taken from
info.json, which can be wrong), and a file a backend cannot decode is an :class:`UnsupportedVideoError` that
names the codec and the backends that can decode it: never a black frame.
"""

from __future__ import annotations

import abc
import contextlib
import importlib.util
import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
import torch

from embodied_core.errors import DataError
from embodied_data.video.probe import probe_codec

__all__ = ["DecodedFrames", "UnsupportedVideoError", "VideoBackend", "backends_that_can_decode"]


class UnsupportedVideoError(DataError):
    """A backend cannot decode a file (codec without a decoder, or a library without video reading)."""


@attrs.frozen
class DecodedFrames:
    """Frames decoded at requested timestamps.

    Attributes:
        frames: uint8 ``[N, C, H, W]`` RGB, one per requested timestamp, in request order.
        pts: presentation time (s) of each returned frame, for the caller's ``tolerance_s`` check.
    """

    frames: torch.Tensor
    pts: list[float]


class VideoBackend(abc.ABC):
    """Base class of frame decoders. Subclasses implement :meth:`_open`, :meth:`_decode` and :meth:`_close`.

    Args:
        cache_size: how many files keep an open decoder (per process); the least recently used is closed.
    """

    name: ClassVar[str] = ""
    unsupported_codecs: ClassVar[frozenset[str]] = frozenset()
    """Codecs (normalized names, see :func:`probe_codec`) this backend has no decoder for."""
    requires: ClassVar[tuple[str, ...]] = ()
    """Top-level modules the backend imports."""
    preload_modules: ClassVar[tuple[str, ...]] = ()
    """Modules :meth:`_open` / :meth:`_decode` import, imported up front by :meth:`preload` (see the module doc)."""

    def __init__(self, *, cache_size: int = 8) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be >= 1, got {cache_size}")
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if missing:
            raise UnsupportedVideoError(
                f"video backend {self.name!r} needs the package(s) {', '.join(missing)}, which are not installed; "
                f"installed backends: {', '.join(backends_that_can_decode(None)) or 'none'}")
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._owner_pid = os.getpid()
        self.preload()

    # ---------------------------------------------------------------- public API
    def decode(self, path: str | Path, timestamps: Sequence[float]) -> DecodedFrames:
        """Frames shown at ``timestamps`` (seconds from the start of the file), uint8 ``[N, C, H, W]``."""
        handle = self._handle(str(path))
        if not timestamps:
            raise ValueError("decode() needs at least one timestamp")
        frames, pts = self._decode(handle, str(path), [float(t) for t in timestamps])
        return DecodedFrames(frames=frames, pts=pts)

    def preload(self) -> None:
        """Imports the decoder modules now (idempotent; a no-op once they are imported in this process).

        Raises:
            UnsupportedVideoError: a module is installed but fails to import (e.g. torchcodec without the FFmpeg
                libraries it links), naming the backend, the module and the error.
        """
        for module in self.preload_modules:
            try:
                importlib.import_module(module)
            except (ImportError, OSError, RuntimeError) as exc:
                raise UnsupportedVideoError(
                    f"video backend {self.name!r}: importing {module} failed ({exc}); fix that installation or "
                    f"use --video-backend with another of: {', '.join(backends_that_can_decode(None)) or 'none'}"
                ) from None

    def close(self) -> None:
        """Closes every cached decoder of this process."""
        if self._owner_pid == os.getpid():
            for handle in self._cache.values():
                self._close(handle)
        self._cache.clear()

    @property
    def num_open(self) -> int:
        """Number of decoders currently cached (for tests and benchmarks)."""
        return len(self._cache) if self._owner_pid == os.getpid() else 0

    # ---------------------------------------------------------------- subclass hooks
    @abc.abstractmethod
    def _open(self, path: str) -> Any:
        """Opens a decoder for ``path`` (called once per file per process while it stays cached)."""

    @abc.abstractmethod
    def _decode(self, handle: Any, path: str, timestamps: list[float]) -> tuple[torch.Tensor, list[float]]:
        """Decodes the frames shown at ``timestamps``; returns (uint8 [N, C, H, W], pts)."""

    def _close(self, handle: Any) -> None:  # noqa: B027 - optional hook: most decoders are freed by the GC
        """Releases a decoder evicted from the cache."""

    # ---------------------------------------------------------------- cache
    def _handle(self, path: str) -> Any:
        if self._owner_pid != os.getpid():
            # a forked worker inherited the parent's decoders: FFmpeg contexts are not safe to share, open anew
            self._cache = OrderedDict()
            self._owner_pid = os.getpid()
        handle = self._cache.get(path)
        if handle is not None:
            self._cache.move_to_end(path)
            return handle
        if not os.path.exists(path):
            raise DataError(f"video file {path} does not exist")
        if self.unsupported_codecs:  # probing costs an extra open: only backends with gaps need it
            self.check_codec(path)
        handle = self._open(path)
        self._cache[path] = handle
        while len(self._cache) > self.cache_size:
            _, old = self._cache.popitem(last=False)
            self._close(old)
        return handle

    def check_codec(self, path: str) -> str:
        """Probes the codec of ``path``; raises :class:`UnsupportedVideoError` if this backend cannot decode it."""
        codec = probe_codec(path)
        if codec in self.unsupported_codecs:
            raise UnsupportedVideoError(
                f"video backend {self.name!r} cannot decode {path}: its codec is {codec} and {self.name} has no "
                f"{codec} decoder; use --video-backend with one of: "
                f"{', '.join(backends_that_can_decode(codec)) or 'none installed'}")
        return codec

    def unsupported(self, path: str, reason: str) -> UnsupportedVideoError:
        """An error for a file this backend failed to decode, naming the backends that can."""
        codec = probe_codec(path)
        others = [b for b in backends_that_can_decode(codec) if b != self.name]
        return UnsupportedVideoError(f"video backend {self.name!r} could not decode {path} (codec {codec}): {reason}; "
                                     f"backends that can decode {codec}: {', '.join(others) or 'none installed'}")

    def __getstate__(self) -> dict[str, Any]:
        # open decoders are process-local: a pickled backend (spawned worker) starts with an empty cache
        state = self.__dict__.copy()
        state["_cache"] = OrderedDict()
        state["_owner_pid"] = -1
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._owner_pid = os.getpid()
        self.preload()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: modules may already be gone
            self.close()


def _installed(modules: Sequence[str]) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def backends_that_can_decode(codec: str | None) -> list[str]:
    """Names of installed, working backends with a decoder for ``codec`` (any codec when None; built-ins only)."""
    from embodied_data.video.backends import BACKEND_CLASSES

    names = []
    for name, cls in BACKEND_CLASSES.items():
        if (codec is not None and codec in cls.unsupported_codecs) or not _installed(cls.requires):
            continue
        available = getattr(cls, "available", None)
        if available is not None and available() is not None:
            continue  # installed but unusable (e.g. torchvision without its video reader)
        names.append(name)
    return names
