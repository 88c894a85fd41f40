"""Deprecated import paths: public modules and names that moved stay importable, with a warning, for at least
one minor release.

:data:`MOVED` is the one table of moves; the next rename is one line there. Each entry maps an old path to its
new one, either a whole module (``"embodied_core.strategies"`` -> ``"embodied_core.distributed"``, which also
covers its submodules: ``embodied_core.strategies.base`` is ``embodied_core.distributed.base``) or one name of a
module that still exists (``"pkg.module:NAME"`` -> ``"pkg.other:NAME"``). :func:`install` (run when
``embodied_core`` is imported, which every embodied package does first) puts a finder at the front of
``sys.meta_path``: importing an old module returns the new module object itself (so classes keep their identity
and nothing is imported twice) and warns once; a moved name is resolved by a module ``__getattr__`` the finder
adds to the old module, also warning once.

The warning is a ``FutureWarning``, not a ``DeprecationWarning``: the import happens inside a plugin's code, where
Python's default filters hide DeprecationWarning, and the person who must see it is the one running
``embodied train`` with that plugin (who can tell its author). Every use is also recorded (:func:`recorded_uses`)
so ``embodied plugins --check`` can name the plugin that imported an old path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["MOVED", "AliasUse", "Moved", "install", "moved_to", "recorded_uses"]


class Moved(NamedTuple):
    """One move: ``old`` -> ``new`` (both modules, or both ``"module:NAME"``), deprecated since release ``since``."""

    old: str
    new: str
    since: str

    @property
    def removal(self) -> str:
        """The first release that may drop the alias: one minor release after ``since``."""
        major, minor, *_ = self.since.split(".")
        return f"{major}.{int(minor) + 1}.0"


MOVED: tuple[Moved, ...] = (
    Moved("embodied_core.strategies", "embodied_core.distributed", since="0.2.0"),
    Moved("embodied_core.strategies.dcp", "embodied_core.checkpoint.dcp", since="0.2.0"),
    Moved("embodied_core.trainer.checkpointer", "embodied_core.checkpoint.checkpointer", since="0.2.0"),
    Moved("embodied_data.specs", "embodied_data.formats.specs", since="0.2.0"),
    Moved("embodied_data.cli.spec", "embodied_data.cli.specs", since="0.2.0"),
    Moved("embodied_data.formats.specs:HDF5_DATASETS", "embodied_data.hdf5.specs:HDF5_DATASETS", since="0.2.0"),
    Moved("embodied_eval.evaluate", "embodied_eval.closed_loop", since="0.2.0"),
)
"""Every deprecated path (oldest first). Paths under embodied packages only: the finder answers for no other."""


class AliasUse(NamedTuple):
    """A deprecated path that was imported: the old and new path and the module whose code imported it."""

    old: str
    new: str
    importer: str


_uses: list[AliasUse] = []


def recorded_uses() -> list[AliasUse]:
    """The deprecated paths imported in this process so far, in order (each once)."""
    return list(_uses)


def moved_to(path: str) -> Moved | None:
    """The move covering ``path`` (a module, ``"module:NAME"``, or a submodule of a moved package), with ``new``
    resolved for ``path`` itself; None when ``path`` is current."""
    module, _, name = path.partition(":")
    for entry in MOVED:  # a moved name first: its module may be current
        if name and entry.old == f"{module}:{name}":
            return entry
    best: Moved | None = None
    for entry in MOVED:
        if ":" in entry.old or not (module == entry.old or module.startswith(entry.old + ".")):
            continue
        if best is None or len(entry.old) > len(best.old):
            best = entry
    if best is None:
        return None
    new_module = best.new + module[len(best.old):]
    return Moved(path, f"{new_module}:{name}" if name else new_module, best.since)


def _message(entry: Moved) -> str:
    return (f"{entry.old} is deprecated since embodied {entry.since} and will be removed in {entry.removal} at the "
            f"earliest: use {entry.new} instead")


_IMPORTLIB_DIR = os.path.dirname(importlib.__file__)


def _is_machinery(filename: str) -> bool:
    return filename.startswith("<frozen importlib") or filename == __file__ or \
        os.path.dirname(filename) == _IMPORTLIB_DIR


def _caller() -> tuple[int, str]:
    """``(stacklevel, module name)`` of the first frame outside the import machinery and this module: the code
    that imported the old path, which the warning points at."""
    frame, level = sys._getframe(1), 1
    while frame is not None and _is_machinery(frame.f_code.co_filename):
        frame = frame.f_back
        # warnings.warn does not count importlib's bootstrap frames in stacklevel (its _is_internal_frame)
        if frame is not None and not ("importlib" in frame.f_code.co_filename
                                      and "_bootstrap" in frame.f_code.co_filename):
            level += 1
    return level, (frame.f_globals.get("__name__", "?") if frame is not None else "?")


def _warn(entry: Moved) -> None:
    level, importer = _caller()
    _uses.append(AliasUse(entry.old, entry.new, importer))
    warnings.warn(_message(entry), FutureWarning, stacklevel=level)


class _ModuleAlias(importlib.abc.Loader):
    """Loads an old module path as the new module object (``sys.modules[old] is sys.modules[new]``)."""

    def __init__(self, entry: Moved) -> None:
        self.entry = entry

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        _warn(self.entry)
        module = importlib.import_module(self.entry.new)
        self._own_spec = module.__spec__  # the import system sets __spec__ to the alias's; exec_module restores it
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._own_spec


class _WithMovedNames(importlib.abc.Loader):
    """Executes a module with its own loader, then adds the ``__getattr__`` that resolves its moved names."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        module.__spec__.loader = module.__loader__ = self.loader  # reloads and tools see the module's own loader
        _add_moved_names(module)


def _moved_names(module_name: str) -> dict[str, Moved]:
    return {entry.old.partition(":")[2]: entry for entry in MOVED if entry.old.partition(":")[0] == module_name}


def _add_moved_names(module: types.ModuleType) -> None:
    names = _moved_names(module.__name__)
    fallback = module.__dict__.get("__getattr__")  # a module may define its own (PEP 562); ours runs first
    if not names or getattr(fallback, "_embodied_moved", False):
        return

    def moved_name(name: str) -> Any:
        entry = names.get(name)
        if entry is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        _warn(entry)
        new_module, _, new_name = entry.new.partition(":")
        value = getattr(importlib.import_module(new_module), new_name)
        setattr(module, name, value)  # warned once: later lookups find the attribute
        return value

    moved_name._embodied_moved = True  # type: ignore[attr-defined]
    module.__getattr__ = moved_name  # type: ignore[method-assign]  # PEP 562: called for names not in the module


class _Finder(importlib.abc.MetaPathFinder):
    """Answers for old module paths and for modules that lost a name; None for everything else."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("embodied_"):
            return None
        entry = moved_to(fullname)
        if entry is not None:
            if importlib.util.find_spec(entry.new) is None:
                return None  # no such module under the new path either: the usual ModuleNotFoundError
            return importlib.machinery.ModuleSpec(fullname, _ModuleAlias(entry))
        if _moved_names(fullname):
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = _WithMovedNames(spec.loader)
                    return spec
        return None


_FINDER = _Finder()


def install() -> None:
    """Puts the finder first on ``sys.meta_path`` (once) and adds moved names to modules imported before."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _FINDER)
    for entry in MOVED:
        module_name, _, name = entry.old.partition(":")
        if name and module_name in sys.modules:
            _add_moved_names(sys.modules[module_name])
