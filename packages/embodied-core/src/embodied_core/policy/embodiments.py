"""The embodiments of a policy folder trained on a dataset mixture (``policy.json`` ``embodiments``).

A run on a mixture records, per embodiment tag, the data section its entries were trained with (cameras, keys,
dims: the inference interface), that interface, and the statistics its samples were normalized with (the default
embodiment's in ``stats.safetensors``, the others' in ``stats/embodiment_<n>.safetensors``)::

    "embodiments": {"default": "arm", "stats": "per_entry",
                    "tags": {"arm": {"data_config": {...}, "interface": {...}, "stats_file": "stats.safetensors",
                                     "entries": [{"path": ..., "name": ..., "weight": ...}]},
                             "g1": {..., "stats_file": "stats/embodiment_1.safetensors"}}}

``load_policy(...).predict_action(obs, embodiment="g1")`` preprocesses ``obs`` with g1's interface and statistics
and returns g1's actions (its width, unnormalized with its statistics); without ``embodiment`` the policy serves its
default one. A folder without ``embodiments`` (one dataset) has only its default, unnamed embodiment.
:class:`EmbodimentPolicy` is what ``embodied serve`` serves: a default tag (``--embodiment``) and the observation's
``embodiment`` key per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from embodied_core.config.converter import structure
from embodied_core.errors import CheckpointError, ObservationError
from embodied_core.policy.folder import POLICY_FILE, STATS_FILE, read_stats
from embodied_core.protocols import Stats

__all__ = ["EMBODIMENT_KEY", "EmbodimentPolicy", "PolicyEmbodiment", "read_embodiments", "select_embodiment"]


@attrs.frozen(kw_only=True)
class PolicyEmbodiment:
    """One embodiment of a policy folder.

    Attributes:
        tag: its tag.
        data_config: the data section its transforms are built with (structured).
        stats: its normalization statistics.
        interface: what a client sends and gets back for it (cameras, shapes, keys, dims, horizon, fps).
    """

    tag: str
    data_config: Any
    stats: Stats
    interface: dict[str, Any]


def _inside(folder: Path, relative: Any, where: str) -> Path:
    """``folder / relative``, refused when it is not a plain relative path inside ``folder``."""
    if not isinstance(relative, str) or not relative or Path(relative).is_absolute():
        raise CheckpointError(f"{where}: expected a relative path inside the folder, got {relative!r}")
    path = (folder / relative).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise CheckpointError(f"{where}: {relative!r} points outside the policy folder")
    return path


def read_embodiments(folder: Path, doc: Mapping[str, Any], data_config_class: type, *,
                     default_stats: Stats) -> tuple[dict[str, PolicyEmbodiment], str | None]:
    """The embodiments ``policy.json`` records, and the default tag; ``({}, None)`` for a folder without them.

    Raises:
        CheckpointError: a malformed ``embodiments`` entry, a statistics file outside the folder or unreadable, a
            data section that does not structure (each naming the tag).
    """
    record = doc.get("embodiments")
    if record is None:
        return {}, None
    where = f"{folder / POLICY_FILE}: embodiments"
    if not isinstance(record, Mapping) or not isinstance(record.get("tags"), Mapping) or not record["tags"]:
        raise CheckpointError(f"{where}: expected a mapping with 'default' and a non-empty 'tags' mapping")
    default = record.get("default")
    if default not in record["tags"]:
        raise CheckpointError(f"{where}: default {default!r} is not one of its tags {sorted(record['tags'])}")
    out: dict[str, PolicyEmbodiment] = {}
    for tag, entry in record["tags"].items():
        at = f"{where}.tags.{tag}"
        if not isinstance(entry, Mapping) or not all(k in entry for k in ("data_config", "interface", "stats_file")):
            raise CheckpointError(f"{at}: expected data_config, interface and stats_file")
        stats_file = _inside(folder, entry["stats_file"], f"{at}.stats_file")
        stats = default_stats if entry["stats_file"] == STATS_FILE else read_stats(stats_file)
        data_config = structure(entry["data_config"], data_config_class, path=f"embodiments.{tag}.data_config",
                                source=str(folder / POLICY_FILE))
        out[str(tag)] = PolicyEmbodiment(tag=str(tag), data_config=data_config, stats=stats,
                                         interface=dict(entry["interface"]))
    return out, str(default)


def select_embodiment(embodiments: Mapping[str, PolicyEmbodiment], default: str | None,
                      requested: str | None) -> PolicyEmbodiment | None:
    """The embodiment ``requested`` (None: the default), or None for a folder without embodiments.

    Raises:
        ObservationError: ``requested`` is not one of the folder's tags (they are listed), or the folder was trained
            on one dataset and ``requested`` is given.
    """
    if not embodiments:
        if requested is not None:
            raise ObservationError(f"embodiment {requested!r}: this policy was trained on one dataset and has no "
                                   "embodiment tags; call predict_action without embodiment")
        return None
    tag = default if requested is None else requested
    if tag not in embodiments:
        raise ObservationError(f"embodiment {requested!r}: not one this policy was trained on; its embodiments: "
                               f"{', '.join(embodiments)} (default {default})")
    return embodiments[tag]


EMBODIMENT_KEY = "embodiment"
"""Observation key choosing the embodiment per request (``embodied serve``): the tag as a str."""


class EmbodimentPolicy:
    """A policy served for embodiment ``embodiment`` by default, each observation may name another under
    :data:`EMBODIMENT_KEY` (what ``embodied serve --embodiment TAG`` serves; a Policy itself).

    Args:
        policy: a loaded policy (``load_policy``).
        embodiment: the default tag (None: the policy's own default).

    Raises:
        ObservationError: ``embodiment`` is not one of the policy's tags.
    """

    def __init__(self, policy: Any, embodiment: str | None = None) -> None:
        self.policy = policy
        self.embodiment = embodiment
        tags = tuple(getattr(policy.metadata, "embodiments", ()))
        if embodiment is not None and embodiment not in tags:
            raise ObservationError(f"--embodiment {embodiment}: "
                                   + (f"not one this policy was trained on; its embodiments: {', '.join(tags)}"
                                      if tags else "this policy was trained on one dataset and has no embodiments"))
        view = getattr(policy, "view", None)
        self.metadata = view(embodiment).metadata if view is not None and embodiment is not None else policy.metadata

    def predict_action(self, observation: Mapping[str, Any]) -> Any:
        """``policy.predict_action`` for the observation's embodiment (its ``embodiment`` key, else the default)."""
        observation = dict(observation)
        tag = observation.pop(EMBODIMENT_KEY, self.embodiment)
        if tag is not None and not isinstance(tag, str):
            raise ObservationError(f"observation[{EMBODIMENT_KEY!r}]: expected the embodiment tag as a str, got "
                                   f"{type(tag).__name__}")
        if tag is None:
            return self.policy.predict_action(observation)
        if not self.metadata.embodiments:
            select_embodiment({}, None, tag)  # raises: one dataset, no tags
        if tag not in self.metadata.embodiments:
            raise ObservationError(f"observation[{EMBODIMENT_KEY!r}]: {tag!r} is not one this policy was trained "
                                   f"on; its embodiments: {', '.join(self.metadata.embodiments)}")
        return self.policy.predict_action(observation, embodiment=tag)

    def reset(self) -> None:
        """New episode (the wrapped policy's reset)."""
        self.policy.reset()
