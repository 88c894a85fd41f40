"""Embodiment-tag tables of the GR00T ports: tag -> projector slot, and the message for an unknown tag (no torch).

The action head keeps one set of state-encoder, action-encoder and action-decoder weights per slot; several tags
share a slot when they describe the same physical robot. Each port declares its own table (the pretrained N1.6 and
N1.7 checkpoints number their slots differently); ``new_embodiment`` (slot 10 in both) is the slot meant for
fine-tuning on a robot the base model has not seen.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

__all__ = ["NEW_EMBODIMENT", "slot_table", "unknown_tag_text"]

NEW_EMBODIMENT = "new_embodiment"


def slot_table(groups: Mapping[int, tuple[str, ...]]) -> dict[str, int]:
    """``{tag: slot}`` from ``{slot: tags}``."""
    return {tag: slot for slot, tags in groups.items() for tag in tags}


def unknown_tag_text(tag: str, table: Mapping[str, int], *, model: str) -> str:
    """The error text for a tag outside ``table`` (with the closest known tag); ``model`` names the port."""
    close = difflib.get_close_matches(tag, list(table), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (f"data.embodiment_tag {tag!r} is not a {model} embodiment tag (known: {', '.join(table)}){hint} Use "
            f"{NEW_EMBODIMENT!r} for a new robot, or set data.embodiment_id to a slot")
