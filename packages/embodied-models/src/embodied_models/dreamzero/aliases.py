"""LoongForge's DreamZero model names, as aliases of our presets (so its launch scripts work unchanged).

Each alias is the preset it names with the LoRA default its name says (``lora`` / ``full``; the embodiment names
keep LoongForge's recipe: LIBERO 5B and AgiBot/YAM 14B train in full). The attribute names say what each one is
an alias of, which is what ``embodied plugins`` lists.
"""

from __future__ import annotations

from embodied_core.registry.specs import ModelSpec
from embodied_models.dreamzero.spec import dreamzero_spec

__all__ = ["ALIAS_OF_DREAMZERO_WAN21_14B_AGIBOT_FULL", "ALIAS_OF_DREAMZERO_WAN21_14B_FULL",
           "ALIAS_OF_DREAMZERO_WAN21_14B_LORA", "ALIAS_OF_DREAMZERO_WAN21_14B_YAM_FULL",
           "ALIAS_OF_DREAMZERO_WAN22_5B_FULL", "ALIAS_OF_DREAMZERO_WAN22_5B_LIBERO_FULL",
           "ALIAS_OF_DREAMZERO_WAN22_5B_LORA"]

_5B, _14B = "dreamzero_wan22_5b", "dreamzero_wan21_14b"


def _alias(name: str, yaml: str, of: str, what: str) -> ModelSpec:
    return dreamzero_spec(name, yaml, f"alias of {of} (LoongForge's name): {what}")


ALIAS_OF_DREAMZERO_WAN22_5B_LORA = _alias("dreamzero_lora_wan22_5b", _5B, _5B, "LoRA")
ALIAS_OF_DREAMZERO_WAN22_5B_FULL = _alias("dreamzero_full_wan22_5b", "dreamzero_full_wan22_5b", _5B,
                                          "full fine-tuning")
ALIAS_OF_DREAMZERO_WAN21_14B_LORA = _alias("dreamzero_lora_wan21_14b", _14B, _14B, "LoRA")
ALIAS_OF_DREAMZERO_WAN21_14B_FULL = _alias("dreamzero_full_wan21_14b", "dreamzero_full_wan21_14b", _14B,
                                           "full fine-tuning")
ALIAS_OF_DREAMZERO_WAN22_5B_LIBERO_FULL = _alias("dreamzero_libero_wan22_5b", "dreamzero_libero_wan22_5b", _5B,
                                                 "LIBERO layout (libero_sim), full fine-tuning")
ALIAS_OF_DREAMZERO_WAN21_14B_AGIBOT_FULL = _alias("dreamzero_agibot_wan21_14b", "dreamzero_agibot_wan21_14b", _14B,
                                                  "AgiBot layout, full fine-tuning")
ALIAS_OF_DREAMZERO_WAN21_14B_YAM_FULL = _alias("dreamzero_yam_wan21_14b", "dreamzero_yam_wan21_14b", _14B,
                                               "YAM layout, full fine-tuning")
