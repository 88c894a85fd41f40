"""GR00T N1.6 embodiment tags and the projector slot each one selects (no torch).

The table is LoongForge's ``EMBODIMENT_TAG_TO_PROJECTOR_INDEX`` (``data/datasets/groot_n1_6/transforms/utils.py``
at ``c6275661``), the slots of the pretrained GR00T-N1.6-3B checkpoint. ``new_embodiment`` (slot 10) is the slot
meant for fine-tuning on a robot the base model has not seen.
"""

from __future__ import annotations

from collections.abc import Mapping

from embodied_models.groot.embodiments import NEW_EMBODIMENT, slot_table, unknown_tag_text

__all__ = ["EMBODIMENT_SLOTS", "NEW_EMBODIMENT", "embodiment_slot", "unknown_tag_message"]

_GROUPS: dict[int, tuple[str, ...]] = {
    0: ("oxe_google",),
    1: ("oxe_widowx",),
    2: ("libero_panda",),
    8: ("unitree_g1",),
    10: (NEW_EMBODIMENT,),
    13: ("robocasa_panda_omron",),
    20: ("gr1",),
    24: ("behavior_r1_pro",),
}

EMBODIMENT_SLOTS: Mapping[str, int] = slot_table(_GROUPS)
"""Embodiment tag -> projector slot of the pretrained GR00T N1.6 checkpoint."""


def unknown_tag_message(tag: str) -> str:
    """The error text for a tag outside :data:`EMBODIMENT_SLOTS` (with the closest known tag)."""
    return unknown_tag_text(tag, EMBODIMENT_SLOTS, model="GR00T N1.6")


def embodiment_slot(tag: str, explicit: int | None = None) -> int:
    """The projector slot of ``tag`` (``explicit`` wins when given); KeyError for an unknown tag."""
    if explicit is not None:
        return explicit
    return EMBODIMENT_SLOTS[tag]
