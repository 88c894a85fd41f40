"""``"package.module:attr"`` object paths: the one parser and importer every part of the registry uses.

The syntax is that of entry-point values: a dotted module, optionally ``:`` and a dotted attribute. Only
hook plugins (group ``embodied.hooks``) may name a whole module; everything else names an attribute.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import attrs

__all__ = ["ObjectPath", "import_object"]

_PATTERN = re.compile(r"^\s*(?P<module>[A-Za-z_][\w.]*)\s*(?::\s*(?P<attr>[A-Za-z_][\w.]*)\s*)?(?:\[[^\]]*\]\s*)?$")
"""importlib.metadata's entry-point value pattern (extras in brackets are accepted and ignored)."""


@attrs.frozen
class ObjectPath:
    """A parsed ``"module:attr"`` (``attr`` is empty for a module path)."""

    module: str
    attr: str = ""

    @classmethod
    def parse(cls, text: str, *, allow_module: bool = False) -> ObjectPath:
        """Parses ``text``; raises ValueError naming the expected form.

        Args:
            allow_module: accept a bare ``"package.module"`` (the value of a module-valued hook plugin).
        """
        match = _PATTERN.match(text) if isinstance(text, str) else None
        if match is None or match["module"].endswith(".") or ".." in match["module"] or \
                (match["attr"] or "").endswith(".") or (not match["attr"] and not allow_module):
            expected = "'package.module:attr' or 'package.module'" if allow_module else "'package.module:attr'"
            raise ValueError(f"expected {expected}, got {text!r}")
        return cls(match["module"], match["attr"] or "")

    def load(self) -> Any:
        """Imports the module and walks the dotted attribute; import and attribute errors propagate."""
        obj: Any = importlib.import_module(self.module)
        for part in filter(None, self.attr.split(".")):
            obj = getattr(obj, part)
        return obj

    def __str__(self) -> str:
        return f"{self.module}:{self.attr}" if self.attr else self.module


def import_object(path: str, *, allow_module: bool = False) -> Any:
    """Imports ``"package.module:attr"`` (attr may be dotted) and returns the object."""
    return ObjectPath.parse(path, allow_module=allow_module).load()
