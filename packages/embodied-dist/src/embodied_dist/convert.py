"""``embodied checkpoint convert SRC DST [--format safetensors|pt] [--optimizer PATH]``.

Turns a DCP checkpoint (``step_<N>/`` or its ``dcp/`` folder) into one weights file, in one process and
without a process group: DCP reads every shard and assembles full tensors. Nothing from the checkpoint
runs: its metadata goes through core's restricted unpickler, every other file through ``weights_only``.
``--optimizer`` also writes the whole optimizer state (keyed by parameter name) - the consolidated export of
a ZeRO-1 or FSDP run, built offline instead of at every save. A ZeRO-1 checkpoint in safetensors/pt format
(one ``optimizer_rank<r>.pt`` per rank) is consolidated the same way.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embodied_core.errors import CheckpointError, UsageError
from embodied_dist.export import add_export_parser, run_export
from embodied_dist.merge_lora_cmd import add_merge_lora_parser, run_merge_lora

__all__ = ["convert", "main"]

logger = logging.getLogger("embodied.checkpoint")

_PROG = "embodied checkpoint"


def _parser() -> argparse.ArgumentParser:
    from embodied_core import registry
    from embodied_core.registry.groups import COMMANDS

    extra = sorted(n[len("checkpoint-"):] for n in registry.names(COMMANDS) if n.startswith("checkpoint-"))
    epilog = f"sub-commands from other packages: {', '.join(extra)}" if extra else None
    parser = argparse.ArgumentParser(prog=_PROG, description="Checkpoint tools.", epilog=epilog)
    commands = parser.add_subparsers(dest="command", required=True)
    convert_ = commands.add_parser("convert", help="DCP checkpoint -> one safetensors or pt file",
                                   description=__doc__.split("\n\n")[1])
    convert_.add_argument("src", type=Path, help="checkpoint directory (step_N, or its dcp/ folder)")
    convert_.add_argument("dst", type=Path, help="output weights file")
    convert_.add_argument("--format", choices=("safetensors", "pt"), default=None,
                          help="output format (default: from DST's suffix, else safetensors)")
    convert_.add_argument("--optimizer", type=Path, default=None, metavar="PATH",
                          help="also write the consolidated optimizer state (torch.save, keyed by parameter name)")
    add_export_parser(commands)
    add_merge_lora_parser(commands)
    return parser


def _dcp_dir(src: Path) -> Path | None:
    if (src / ".metadata").is_file():
        return src
    if (src / "dcp" / ".metadata").is_file():
        return src / "dcp"
    return None


def _zero_optimizer_files(src: Path) -> list[Path]:
    return sorted((src / "training_state").glob("optimizer_rank*.pt"),
                  key=lambda p: int(p.stem.removeprefix("optimizer_rank")))


def _merge_optimizer(parts: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {"state": {}, "param_groups": parts[0].get("param_groups", [])}
    for part in parts:
        merged["state"].update(part.get("state", {}))
    return merged


def convert(src: Path, dst: Path, *, fmt: str | None = None, optimizer: Path | None = None) -> dict[str, int]:
    """Writes ``dst`` (and ``optimizer``) from the checkpoint ``src``; returns counts of what was written.

    Raises:
        UsageError: ``src`` is not a checkpoint this command reads, or the format is unknown.
        CheckpointError: the checkpoint holds no optimizer state but ``optimizer`` was asked for.
    """
    import torch

    from embodied_core.checkpoint.dcp_reader import read_dcp_state_dict
    from embodied_core.checkpoint.file_format import load_model_file, save_model_file
    from embodied_core.checkpoint.readers import torch_load

    fmt = fmt or ("pt" if dst.suffix == ".pt" else "safetensors")
    if fmt not in ("safetensors", "pt"):
        raise UsageError(f"--format {fmt!r}: valid formats are safetensors, pt")
    dcp_dir = _dcp_dir(src)
    optim_state: dict[str, Any] | None = None
    if dcp_dir is not None:
        wanted = {"model", "optim"} if optimizer else {"model"}
        loaded = read_dcp_state_dict(dcp_dir, wanted)  # restricted metadata unpickler, weights_only blobs
        model_state = loaded.get("model", {})
        optim_state = loaded.get("optim")
    elif optimizer and _zero_optimizer_files(src):
        model_state = load_model_file(src)
        optim_state = _merge_optimizer([torch_load(p) for p in _zero_optimizer_files(src)])
    else:
        raise UsageError(f"{src}: not a DCP checkpoint (no .metadata in it or in its dcp/ folder)"
                         + ("" if optimizer else "; safetensors/pt checkpoints are already one file"))
    if not model_state:
        raise CheckpointError(f"{src}: the checkpoint holds no model weights")
    dst.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dst.parent, prefix=".convert-") as tmp:
        save_model_file(model_state, Path(tmp), fmt).replace(dst)  # complete file or none at dst
    counts = {"tensors": len(model_state)}
    if optimizer:
        if not optim_state:
            raise CheckpointError(f"{src}: no optimizer state (saved with --no-save-training-state?)")
        torch.save(optim_state, optimizer)
        counts["optimizer_entries"] = len(optim_state.get("state", {}))
    return counts


def main(argv: Sequence[str]) -> int:
    """Entry point of ``embodied checkpoint`` (group ``embodied.commands``)."""
    from embodied_core import registry
    from embodied_core.registry.groups import COMMANDS

    # Sub-commands contributed by other packages: ``embodied checkpoint X`` runs the embodied.commands entry
    # ``checkpoint-X`` (e.g. ``checkpoint-init-fastwam-action-dit`` of embodied-models), never imported here.
    if argv and not argv[0].startswith("-") and f"checkpoint-{argv[0]}" in registry.names(COMMANDS):
        return registry.load_factory(COMMANDS, f"checkpoint-{argv[0]}")(list(argv[1:]))
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command == "export":
        return run_export(args)
    if args.command == "merge-lora":
        return run_merge_lora(args)
    counts = convert(args.src, args.dst, fmt=args.format, optimizer=args.optimizer)
    print(f"wrote {args.dst} ({counts['tensors']} tensors)"
          + (f" and {args.optimizer} ({counts['optimizer_entries']} parameters' optimizer state)"
             if args.optimizer else ""))
    return 0
