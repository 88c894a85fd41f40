"""Observation key maps: clients that send their own key names (openpi's ``image``, ``state``, ``prompt``).

``--obs-key-map "image=observation.images.front,state=observation.state,prompt=task"`` renames a client's keys
to the LeRobot keys the policy reads; keys the map does not name pass through unchanged, so LeRobot keys always
work. Nested maps, as openpi's ALOHA client sends them (``{"images": {"cam_high": ...}}``), are addressed by
their path joined with ``/`` (``images/cam_high=observation.images.top``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from embodied_core.errors import UsageError

__all__ = ["KeyMap", "flatten", "parse_key_map"]


class KeyMap:
    """A validated mapping from client keys to policy keys.

    Args:
        pairs: ``{client key: policy key}``.
    """

    def __init__(self, pairs: Mapping[str, str] | None = None) -> None:
        self.pairs: dict[str, str] = dict(pairs or {})
        targets: dict[str, str] = {}
        for source, target in self.pairs.items():
            if target in targets:
                raise UsageError(f"--obs-key-map: {targets[target]!r} and {source!r} both map to {target!r}")
            targets[target] = source
        self._sources = targets

    def check_targets(self, valid: Iterable[str]) -> None:
        """Raises a UsageError when a mapped-to key is not one the policy reads (``valid``)."""
        valid = list(valid)
        bad = [f"{s}={t}" for s, t in self.pairs.items() if t not in valid]
        if bad:
            raise UsageError(f"--obs-key-map: {', '.join(bad)}: the policy reads none of these keys; "
                             f"map client keys to {', '.join(valid)}")

    def source_of(self, key: str) -> str | None:
        """The client key that maps to policy key ``key`` (None when nothing is mapped to it)."""
        return self._sources.get(key)

    def apply(self, observation: Mapping[str, Any]) -> dict[str, Any]:
        """The observation with client keys renamed (nested maps flattened with ``/`` first)."""
        out: dict[str, Any] = {}
        sent_as: dict[str, str] = {}
        for key, value in flatten(observation).items():
            target = self.pairs.get(key, key)
            if target in out:
                first, second = sorted((sent_as[target], key), key=lambda k: k == target)
                raise UsageError(f"observation has both {first!r} (mapped to {target!r}) and {second!r}; send one")
            out[target] = value
            sent_as[target] = key
        return out

    def describe(self) -> str:
        """``"image=observation.images.front, ..."`` or ``"none"``."""
        return ", ".join(f"{s}={t}" for s, t in self.pairs.items()) or "none"


def flatten(observation: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested string-keyed maps -> one level with ``/``-joined keys; other values are kept as they are."""
    out: dict[str, Any] = {}
    for key, value in observation.items():
        if not isinstance(key, str):
            raise UsageError(f"observation keys must be strings, got {key!r}")
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, prefix=f"{path}/"))
        else:
            out[path] = value
    return out


def parse_key_map(text: str | None) -> KeyMap:
    """Parses ``"a=b,c=d"`` (spaces around items allowed); an empty or None text is the identity map."""
    pairs: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        source, sep, target = (part.strip() for part in item.partition("="))
        if not sep or not source or not target:
            raise UsageError(f"--obs-key-map: {item!r} is not CLIENT_KEY=POLICY_KEY "
                             "(e.g. image=observation.images.front,prompt=task)")
        if source in pairs:
            raise UsageError(f"--obs-key-map: {source!r} is mapped twice")
        pairs[source] = target
    return KeyMap(pairs)
