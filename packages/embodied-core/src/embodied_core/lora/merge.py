"""``embodied checkpoint merge-lora SRC DST``: an adapter checkpoint -> a full policy folder with merged weights.

The base the checkpoint references is loaded, the adapters are injected and loaded, then every LoRA layer folds
its update into the base weight (PEFT's ``merge``: ``W + s * B @ A``) and is replaced by that base layer, and each
``modules_to_save`` wrapper by its trained copy. The result has the model's own keys, so ``load_policy(DST)``,
``embodied serve DST`` and ``--pretrained-checkpoint DST`` read it like any exported folder.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import torch
from torch import nn

from embodied_core.errors import EmbodiedError, UsageError
from embodied_core.lora.base_ref import read_lora_record
from embodied_core.lora.layout import ADAPTER_CONFIG, is_adapter_folder
from embodied_core.lora.state import ADAPTER_NAME

__all__ = ["MergeResult", "merge_and_unload", "merge_lora"]


@attrs.frozen
class MergeResult:
    """What :func:`merge_lora` wrote."""

    source: Path
    destination: Path
    step: int | None
    num_layers: int
    num_tensors: int


def _replace(model: nn.Module, path: str, module: nn.Module) -> None:
    parent_path, _, name = path.rpartition(".")
    setattr(model.get_submodule(parent_path) if parent_path else model, name, module)


@torch.no_grad()
def merge_and_unload(model: nn.Module) -> int:
    """Folds every adapter into its base layer and removes PEFT's layers from ``model`` (in place).

    Returns the number of merged layers. Raises EmbodiedError when a merged weight is not finite.
    """
    from peft.tuners.tuners_utils import BaseTunerLayer
    from peft.utils import ModulesToSaveWrapper

    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, BaseTunerLayer)]
    wrappers = [(n, m) for n, m in model.named_modules() if isinstance(m, ModulesToSaveWrapper)]
    for path, layer in layers:
        try:
            layer.merge(safe_merge=True, adapter_names=[ADAPTER_NAME])
        except ValueError as exc:  # safe_merge: NaN/Inf in the merged weight
            raise EmbodiedError(f"merging the adapter of {path}: {exc}") from None
        _replace(model, path, layer.get_base_layer())
    for path, wrapper in wrappers:
        _replace(model, path, wrapper.modules_to_save[ADAPTER_NAME])
    model.__dict__.pop("peft_config", None)
    return len(layers)


def merge_lora(src: str | Path, dst: str | Path, *, allow_external_references: bool = False) -> MergeResult:
    """Writes the policy folder of ``src`` with the adapters merged into the base weights to ``dst``.

    Args:
        src: a LoRA checkpoint directory, or a run's ``--output-dir`` (its newest checkpoint).
        dst: a new (or empty) directory.
        allow_external_references: read base weights (or other files) outside ``src``'s folder or run directory
            (a ``--pretrained-checkpoint`` base always is); refused by default, see
            :mod:`embodied_core.policy.references`.

    Raises:
        UsageError: ``src`` holds full weights already, or ``dst`` exists and is not empty.
        CheckpointError: a file of ``src`` or its base weights is missing, changed or does not fit.
    """
    from embodied_core.policy.export import check_destination, write_policy_folder
    from embodied_core.policy.load import read_policy_folder

    dst = Path(dst)
    check_destination(dst)
    folder = read_policy_folder(src, allow_external_references=allow_external_references)
    if not is_adapter_folder(folder.path):
        raise UsageError(f"{folder.path}: not a LoRA checkpoint (no {ADAPTER_CONFIG}); it holds full weights already "
                         "(embodied checkpoint export copies it)")
    model = folder.build_model()
    num_layers = merge_and_unload(model)
    weights = {key: value.detach() for key, value in model.state_dict().items()}
    leftover = [key for key in weights if "lora_" in key or ".base_layer." in key or ".modules_to_save." in key]
    if leftover:
        raise EmbodiedError(f"merging {folder.path}: adapter tensors left after the merge: {leftover[:5]}")
    base, training = read_lora_record(folder.path)
    record = {"merged_from": str(folder.path),
              "lora": {"base": base.path, "r": training.get("r"), "lora_alpha": training.get("lora_alpha"),
                       "layers": num_layers, "modules_to_save": training.get("modules_to_save")}}
    write_policy_folder(folder.path, folder.doc, weights, dst, step=folder.step, record=record)
    return MergeResult(source=folder.path, destination=dst, step=folder.step, num_layers=num_layers,
                       num_tensors=len(weights))
