"""Entry-point spec of the SmolVLA command (``embodied.commands``: ``checkpoint-import-lerobot-smolvla``). Imports
no torch."""

from __future__ import annotations

from embodied_core.registry import PluginSpec

__all__ = ["IMPORT_LEROBOT_COMMAND"]

IMPORT_LEROBOT_COMMAND = PluginSpec(
    name="checkpoint-import-lerobot-smolvla",
    description="`embodied checkpoint import-lerobot-smolvla SRC DST`: a lerobot-train SmolVLA checkpoint -> a policy "
    "folder for load_policy / embodied eval / embodied serve",
    factory="embodied_models.smolvla.lerobot_import:main")
