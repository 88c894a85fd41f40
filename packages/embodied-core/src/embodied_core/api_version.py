"""The plugin-API version of this embodied-core and the check of a plugin's ``requires_api``.

``PLUGIN_API_VERSION`` is ``(major, minor)``: the minor grows when the plugin API gains something (a spec field,
an optional protocol member, a deprecated alias for a moved module), the major when something a plugin may rely
on goes away (a deprecated alias is removed, a required member is added). CHANGELOG.md maps API versions to
releases. A spec declares what it needs with ``requires_api`` (a PEP 440 specifier such as ``">=1.0,<2"``);
selecting a plugin whose requirement this core does not satisfy is a PluginError.

Imports no torch (``packaging`` only), like every module a spec loads.
"""

from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

__all__ = ["PLUGIN_API_VERSION", "api_version_string", "parse_requires_api", "satisfies_requires_api"]

PLUGIN_API_VERSION: tuple[int, int] = (1, 1)
"""``(major, minor)`` of the plugin API (1.0: embodied 0.1.x; 1.1: embodied 0.2.x)."""


def api_version_string(version: tuple[int, int] = PLUGIN_API_VERSION) -> str:
    """``"1.1"`` for ``(1, 1)``."""
    return f"{version[0]}.{version[1]}"


def parse_requires_api(text: str) -> SpecifierSet:
    """The specifier set of a ``requires_api`` string; ValueError naming the string and the expected form."""
    try:
        specifiers = SpecifierSet(text)
    except InvalidSpecifier:
        raise ValueError(f"expected a PEP 440 version specifier over the plugin API version such as '>=1.0,<2', "
                         f"got {text!r}") from None
    if not str(specifiers):
        raise ValueError(f"expected a PEP 440 version specifier such as '>=1.0,<2', got the empty string {text!r}")
    return specifiers


def satisfies_requires_api(text: str, version: tuple[int, int] = PLUGIN_API_VERSION) -> bool:
    """Whether the plugin API ``version`` satisfies the ``requires_api`` specifier ``text``."""
    return parse_requires_api(text).contains(Version(api_version_string(version)), prereleases=True)
