"""An adapter checkpoint as a model for inference: the referenced base weights plus the stored adapters.

Used by :meth:`embodied_core.policy.load.PolicyFolder.build_model` (so ``load_policy`` and ``embodied serve``
take a LoRA checkpoint directly) and by ``embodied checkpoint merge-lora``.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from embodied_core.checkpoint.readers import read_tensors
from embodied_core.lora.base_ref import read_lora_record
from embodied_core.lora.inject import inject_saved_adapters
from embodied_core.lora.layout import ADAPTER_WEIGHTS, BASE_FILE
from embodied_core.lora.state import load_adapter_state_dict

__all__ = ["load_adapter_checkpoint"]


def load_adapter_checkpoint(model: nn.Module, folder: Path) -> nn.Module:
    """Loads the base ``folder/lora_base.json`` references into ``model``, injects the adapters of
    ``adapter_config.json`` and loads ``adapter_model.safetensors`` strictly (in place; returns ``model``).

    Raises:
        CheckpointError: a file is missing or unreadable, the base is gone or changed, or the adapters do not fit.
    """
    folder = Path(folder)
    base, _ = read_lora_record(folder)
    base.load_into(model, source=folder / BASE_FILE)
    inject_saved_adapters(model, folder)
    load_adapter_state_dict(model, read_tensors(folder / ADAPTER_WEIGHTS), None, source=str(folder / ADAPTER_WEIGHTS))
    return model
