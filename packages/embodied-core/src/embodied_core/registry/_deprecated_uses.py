"""Which deprecated import paths (:data:`embodied_core.deprecation.MOVED`) a plugin relies on.

Found three ways, for ``embodied plugins --check``:

- the paths its entry point and spec declare (the spec module, ``factory``, ``checks``, ``transforms``, ...) under
  a moved module;
- the import statements of the modules those paths name, read with :mod:`ast` (the source is parsed, never run,
  so this part needs no heavy import);
- the deprecated paths imported while the check loaded the plugin (``embodied_core.deprecation.recorded_uses``),
  which covers imports deeper in the plugin's code. An old path another plugin imported first is attributed to
  that one only: Python imports a module once.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import attrs

from embodied_core.deprecation import Moved, moved_to
from embodied_core.registry._discovery import PluginEntry
from embodied_core.registry._paths import ObjectPath
from embodied_core.registry.specs import PluginSpec, _object_path, _object_paths

__all__ = ["declared_paths", "deprecated_imports", "format_uses", "static_uses"]


def _object_path_fields(record: object) -> list[str]:
    """The ``"module:attr"`` values of an attrs record (the fields validated as paths), nested records included."""
    paths: list[str] = []
    for field in attrs.fields(type(record)):
        value = getattr(record, field.name)
        if field.validator is _object_path and value is not None:
            paths.append(value)
        elif field.validator is _object_paths:
            paths.extend(value)
        elif attrs.has(type(value)):  # e.g. DatasetFormatSpec.dataset_defaults
            paths.extend(_object_path_fields(value))
    return paths


def declared_paths(entry: PluginEntry, spec: PluginSpec | None) -> list[str]:
    """The entry point's value and every ``"module:attr"`` field of its spec."""
    paths = [entry.value] if entry.source != "register" else []
    return paths + (_object_path_fields(spec) if spec is not None else [])


def _source_file(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None  # the load itself reports a module that cannot be found
    origin = spec.origin if spec is not None else None
    return Path(origin) if origin and origin.endswith(".py") else None


def _imported_moves(tree: ast.AST, module: str, *, is_package: bool) -> list[Moved]:
    """The moves the import statements of ``module`` hit: the imported module itself, else (``from m import x``)
    the submodule ``m.x`` or the moved name ``m:x``."""
    moves: list[Moved | None] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            moves.extend(moved_to(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the module's own package
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[:max(len(parts) - node.level + 1, 0)]
                base = ".".join([*parts, base] if base else parts)
            move = moved_to(base)
            if move is not None:
                moves.append(move)
                continue
            for alias in node.names:
                moves.append(moved_to(f"{base}.{alias.name}") or moved_to(f"{base}:{alias.name}"))
    return [move for move in moves if move is not None]


def deprecated_imports(module: str) -> list[tuple[Moved, str]]:
    """``(move, module)`` for each deprecated path the source of ``module`` imports (parsed, not run)."""
    path = _source_file(module)
    if path is None:
        return []
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []  # the load itself reports a module that cannot be read or compiled
    return [(move, module) for move in _imported_moves(tree, module, is_package=path.name == "__init__.py")]


def static_uses(entry: PluginEntry, spec: PluginSpec | None) -> list[tuple[Moved, str]]:
    """Deprecated paths the plugin declares or its declared modules import: ``(move, where)`` pairs."""
    uses: list[tuple[Moved, str]] = []
    modules: list[str] = []
    for text in declared_paths(entry, spec):
        try:
            path = ObjectPath.parse(text, allow_module=True)
        except ValueError:
            continue
        move = moved_to(str(path) if path.attr else path.module)
        if move is not None:  # its source is the new module's, one of ours: nothing more to read
            uses.append((move, f"declared {text}"))
        elif path.module not in modules:
            modules.append(path.module)
    for module in modules:
        uses.extend(deprecated_imports(module))
    return uses


def format_uses(uses: list[tuple[Moved, str]]) -> str:
    """``"deprecated: old -> new (where); ..."`` with each old path once, or an empty string. An old package
    whose old submodule is listed too is left out (importing ``a.old.b`` imports ``a.old`` first)."""
    seen: dict[str, str] = {}
    for move, where in uses:
        seen.setdefault(move.old, f"{move.old} -> {move.new} ({where})")
    kept = [text for old, text in seen.items() if not any(other.startswith(old + ".") for other in seen)]
    return f"deprecated: {'; '.join(kept)}" if kept else ""
