"""``embodied checkpoint export SRC DST``: the inference-only policy folder of a checkpoint.

DST gets the weights as ``model.safetensors`` (a DCP checkpoint is gathered in this process), the policy files
(``policy.json``, ``stats.safetensors``, ``tokenizer/``, ``assets/``) and a ``meta.json``, and no optimizer,
scheduler, RNG or data state; ``embodied_core.load_policy(DST)`` loads it. The work is
``embodied_core.policy.export_policy`` (usable without embodied-dist); this module is its command line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_export_parser", "run_export"]

DESCRIPTION = ("Writes the inference-only policy folder of a checkpoint: the weights as model.safetensors (a DCP "
               "checkpoint is gathered in this process), policy.json, stats.safetensors, tokenizer/ and assets/, and "
               "a meta.json with the step; no optimizer, scheduler, RNG or data state. "
               "embodied_core.load_policy(DST) loads it.")


def add_export_parser(commands: argparse._SubParsersAction) -> None:
    """Adds the ``export`` sub-command to the ``embodied checkpoint`` parser."""
    export = commands.add_parser("export", help="checkpoint -> inference-only policy folder (weights + policy "
                                 "files, no optimizer)", description=DESCRIPTION)
    export.add_argument("src", type=Path, help="a checkpoint directory (step_N), a run's --output-dir (its newest "
                        "checkpoint) or an exported folder")
    export.add_argument("dst", type=Path, help="the folder to write (must not exist, or be empty)")
    export.add_argument("--allow-external-references", action="store_true",
                        help="copy files the policy folder references outside itself (../ or absolute paths, "
                             "symbolic links); refused by default: the error lists them")


def run_export(args: argparse.Namespace) -> int:
    """Runs ``export`` and prints what it wrote."""
    from embodied_core.policy.export import export_policy

    result = export_policy(args.src, args.dst, allow_external_references=args.allow_external_references)
    step = f"step {result.step}" if result.step is not None else "unknown step"
    print(f"exported {result.source} ({step}) to {result.destination}: {result.num_tensors} tensors, "
          f"{result.num_bytes / 2**20:.1f} MB of weights")
    return 0
