"""LoRA fine-tuning on PEFT (``--use-lora``): adapters injected into the model itself, checkpoints in PEFT's format.

- :mod:`~embodied_core.lora.options`: the ``--lora-*`` flags and their rules (no torch);
- :mod:`~embodied_core.lora.targets`, :mod:`~embodied_core.lora.inject`: which layers, and PEFT's injection;
- :mod:`~embodied_core.lora.training`: what the trainer calls (base weights, adapters, resume);
- :mod:`~embodied_core.lora.checkpoint`: the ``lora`` checkpoint format;
- :mod:`~embodied_core.lora.policy`, :mod:`~embodied_core.lora.merge`: adapter checkpoints for inference, and
  ``embodied checkpoint merge-lora``.

Importing this package imports neither torch nor peft (``peft`` comes with ``embodied-core[lora]``).
"""

from embodied_core.lora.layout import ADAPTER_CONFIG, ADAPTER_WEIGHTS, BASE_FILE, is_adapter_folder
from embodied_core.lora.options import LoraSettings, lora_problems

__all__ = ["ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "BASE_FILE", "LoraSettings", "is_adapter_folder", "lora_problems"]
