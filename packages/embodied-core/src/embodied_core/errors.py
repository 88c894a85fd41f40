"""Typed exceptions of embodied.

User mistakes (bad flags, bad config, unknown plugins) derive from :class:`UsageError`: the CLI turns them
into a message and exit code 2, without a traceback. Everything else that fails at run time derives from
:class:`EmbodiedError` and exits with code 1.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "CheckpointError",
    "ConfigError",
    "DataError",
    "EmbodiedError",
    "ExternalReferenceError",
    "IncompatiblePluginError",
    "NotSupportedYetError",
    "ObservationError",
    "PluginError",
    "PluginLoadError",
    "RankFailureError",
    "UnknownPluginError",
    "UsageError",
    "closest_match",
]


class EmbodiedError(Exception):
    """Base class of every error raised by embodied."""


class UsageError(EmbodiedError, ValueError):
    """A mistake the user can fix by changing a flag, a config file or the environment."""


class ConfigError(UsageError):
    """One or more configuration problems, each naming its path and what would be valid.

    Args:
        problems: one human-readable line per problem.
        source: where the values came from (a file, "flags", ...), prefixed to the message.
    """

    def __init__(self, problems: Iterable[str] | str, *, source: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        head = f"invalid configuration ({source})" if source else "invalid configuration"
        if len(self.problems) == 1:
            message = f"{head}: {self.problems[0]}"
        else:
            message = f"{head}, {len(self.problems)} problems:\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(message)


class NotSupportedYetError(UsageError):
    """A flag value whose feature is not available in the installed packages."""


class ObservationError(UsageError):
    """An observation handed to a policy lacks a key, has an extra one, or has the wrong shape or dtype; the
    message names the key, what was received and what is expected."""


class PluginError(UsageError):
    """A plugin could not be found or is declared twice."""


class IncompatiblePluginError(PluginError):
    """A selected plugin requires a plugin-API version (``PluginSpec.requires_api``) this core does not provide."""


class UnknownPluginError(PluginError):
    """A plugin name that no installed distribution provides."""


class PluginLoadError(PluginError):
    """A selected plugin failed to import; names the distribution that provides it.

    A usage error (exit code 2) like every other problem found before a run starts: a broken model, optimizer
    or logger is reported the same way, and the fix is in the environment (reinstall, deselect or block it).
    """


class ExternalReferenceError(UsageError):
    """A policy folder names files outside itself (``../``, an absolute path, a symbolic link, a hub id) and the
    caller did not allow external references (``--allow-external-references``); the message lists each one and
    what it would read."""


class CheckpointError(EmbodiedError):
    """A checkpoint is missing, incomplete or does not match the model."""


class RankFailureError(EmbodiedError):
    """Another rank of a distributed job failed (its error is quoted) or stopped responding (named), so this rank
    stops too instead of waiting in a collective."""


class DataError(EmbodiedError):
    """A dataset is missing files or is inconsistent."""


def closest_match(name: str, choices: Iterable[str]) -> str | None:
    """Returns the choice closest to ``name`` (case-insensitive), or None when nothing is close."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return lowered[hits[0]] if hits else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Formats a ``" (did you mean 'x'?)"`` suffix, or an empty string."""
    match = closest_match(name, choices)
    return f" (did you mean {match!r}?)" if match else ""
