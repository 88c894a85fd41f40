"""``embodied checkpoint merge-lora SRC DST``: a LoRA checkpoint -> a full policy folder with the adapters merged.

The work is ``embodied_core.lora.merge.merge_lora`` (usable without embodied-dist); this module is its command line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_merge_lora_parser", "run_merge_lora"]

DESCRIPTION = ("Loads the base weights a LoRA checkpoint references (lora_base.json), its adapters "
               "(adapter_model.safetensors + adapter_config.json), folds each adapter into its layer's weight and "
               "writes a full policy folder: model.safetensors with the model's own keys, policy.json, "
               "stats.safetensors, tokenizer/, assets/ and meta.json. Its outputs equal the adapter model's (up to "
               "float rounding); embodied_core.load_policy(DST), embodied serve DST and --pretrained-checkpoint DST "
               "read it.")


def add_merge_lora_parser(commands: argparse._SubParsersAction) -> None:
    """Adds the ``merge-lora`` sub-command to the ``embodied checkpoint`` parser."""
    merge = commands.add_parser("merge-lora", help="LoRA checkpoint -> full policy folder with merged weights",
                                description=DESCRIPTION)
    merge.add_argument("src", type=Path, help="a LoRA checkpoint directory (step_N) or a run's --output-dir (its "
                       "newest checkpoint)")
    merge.add_argument("dst", type=Path, help="the folder to write (must not exist, or be empty)")
    merge.add_argument("--allow-external-references", action="store_true",
                       help="read the base weights lora_base.json references (and other files) outside the "
                            "checkpoint's folder or run directory; refused by default: the error lists them")


def run_merge_lora(args: argparse.Namespace) -> int:
    """Runs ``merge-lora`` and prints what it wrote."""
    from embodied_core.lora.merge import merge_lora

    result = merge_lora(args.src, args.dst, allow_external_references=args.allow_external_references)
    step = f"step {result.step}" if result.step is not None else "unknown step"
    print(f"merged {result.num_layers} LoRA layer(s) of {result.source} ({step}) into {result.destination}: "
          f"{result.num_tensors} tensors")
    return 0
