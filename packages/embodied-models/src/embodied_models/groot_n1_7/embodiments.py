"""GR00T N1.7 embodiment tags and the projector slot each one selects (no torch).

The action head keeps one set of state-encoder, action-encoder and action-decoder weights per slot
(``model.max_num_embodiments`` = 32). Several tags share a slot when they describe the same physical robot. The
table follows Isaac-GR00T's N1.7 processor (``processing_gr00t_n1d7.py``); ``new_embodiment`` is the slot meant
for fine-tuning on a robot the base model has not seen.
"""

from __future__ import annotations

from collections.abc import Mapping

from embodied_models.groot.embodiments import NEW_EMBODIMENT, slot_table, unknown_tag_text

__all__ = ["EMBODIMENT_SLOTS", "NEW_EMBODIMENT", "embodiment_slot", "unknown_tag_message"]

_GROUPS: dict[int, tuple[str, ...]] = {
    0: ("simpler_env_google",),
    1: ("simpler_env_widowx",),
    2: ("libero_sim",),
    10: (NEW_EMBODIMENT, "robocasa_panda_omron", "robocasa_gr1_tabletop"),
    11: ("unitree_g1_sonic",),
    24: ("oxe_droid_relative_eef_relative_joint",),
    25: ("real_g1_relative_eef_relative_joints", "unitree_g1_full_body_with_waist_height_nav_cmd"),
    26: ("real_r1_pro_sharpa_relative_eef", "real_r1_pro_sharpa_relative_eef_human",
         "real_r1_pro_sharpa_relative_eef_maxinsights", "real_r1_pro_sharpa_relative_eef_mecka"),
    27: ("xdof_relative_eef_relative_joint", "xdof_relative_eef_relative_joint_subtask"),
}

EMBODIMENT_SLOTS: Mapping[str, int] = slot_table(_GROUPS)
"""Embodiment tag -> projector slot of the pretrained GR00T N1.7 checkpoint."""


def unknown_tag_message(tag: str) -> str:
    """The error text for a tag outside :data:`EMBODIMENT_SLOTS` (with the closest known tag)."""
    return unknown_tag_text(tag, EMBODIMENT_SLOTS, model="GR00T N1.7")


def embodiment_slot(tag: str, explicit: int | None = None) -> int:
    """The projector slot of ``tag`` (``explicit`` wins when given); KeyError for an unknown tag."""
    if explicit is not None:
        return explicit
    return EMBODIMENT_SLOTS[tag]
