"""``--compile`` / ``--compile-mode``: regional ``torch.compile`` of a model's blocks.

Every instance of the classes the model declares as its blocks (``ModelPlugin.fsdp_units()``, outermost
instances only) gets its ``forward`` replaced by a compiled one; the rest of the model (embeddings, heads, the
loss, the loop over the blocks) stays eager. Compiling blocks rather than the whole model keeps compile time
to one graph per block class, since every instance of a class runs the same code with the same guards, and
keeps graph breaks in model glue code from mattering.

dynamo keys its cache on a block class's code, so when instances of one class run at different fixed shapes (the
stages of a vision pyramid such as Florence-2's DaViT), automatic dynamic shapes turn the second stage's graph
symbolic over all stages, which inductor cannot always build (torch 2.13 on DaViT: "cannot determine truth value
of Relational"). A model marks such blocks with :func:`mark_static_shapes`; they are compiled with static shapes,
one graph per stage. Other blocks keep automatic dynamic shapes, so a new sequence length (prompts padded to the
longest in the batch) does not recompile every batch.

Only ``forward`` is compiled, not the module call, so everything that works through module hooks stays eager
around the compiled code and composes with it: activation checkpointing (torch's composable non-reentrant
checkpoint, whose recomputation calls the compiled forward again), FSDP2 (``fully_shard`` on the same block
instances afterwards: its unshard/reshard hooks run outside the graph, as torchtitan orders it) and DDP (with
``--dynamo-optimize-ddp`` deciding whether dynamo splits the graphs at bucket boundaries). LoRA adapters are
injected before compilation, so they are part of the compiled blocks. Parameter names, state dicts and
checkpoints are unchanged.

The trainer applies it after ``--freeze-modules`` and activation checkpointing and before DDP/FSDP wrapping.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence

import attrs
from torch import nn

from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import UsageError

__all__ = ["CompileReport", "compile_blocks", "compile_problems", "compiled_block_names", "mark_static_shapes"]

_CUDA_GRAPH_MODES = frozenset({"reduce-overhead"})
_COMPILED_ATTR = "_embodied_compiled_forward"
_STATIC_ATTR = "_embodied_compile_static_shapes"


@attrs.frozen
class CompileReport:
    """Which blocks :func:`compile_blocks` compiled, by class, and with which mode."""

    mode: str
    blocks: tuple[str, ...]
    classes: tuple[str, ...]
    static_blocks: tuple[str, ...] = ()
    """The blocks compiled with static shapes (marked by the model with :func:`mark_static_shapes`)."""

    def __str__(self) -> str:
        shown = ", ".join(self.blocks[:4]) + (f" ... ({len(self.blocks)})" if len(self.blocks) > 4 else "")
        static = f" ({len(self.static_blocks)} with static shapes)" if self.static_blocks else ""
        return (f"--compile (mode {self.mode}): torch.compile on {len(self.blocks)} block(s) of "
                f"{', '.join(self.classes)}{static}: {shown}")


def mark_static_shapes(*modules: nn.Module) -> None:
    """Marks block instances that :func:`compile_blocks` compiles with static shapes (``dynamic=False``): blocks
    of one class that run at different fixed shapes by design (see the module doc). A model calls it when it is
    built; the mark is a plain attribute, not part of the state dict."""
    for module in modules:
        setattr(module, _STATIC_ATTR, True)


def _outermost(named: Sequence[tuple[str, nn.Module]]) -> list[tuple[str, nn.Module]]:
    kept: list[tuple[str, nn.Module]] = []
    for name, module in named:  # named_modules order: a parent comes before its children
        if not any(name.startswith(outer + ".") for outer, _ in kept):
            kept.append((name, module))
    return kept


def compile_blocks(model: nn.Module, *, mode: str = "default") -> CompileReport:
    """Compiles the forward of every block instance of ``model`` in place (see the module doc); ``model`` is a
    model plugin, whose ``fsdp_units()`` the trainer checked.

    Raises:
        UsageError: the model declares no blocks (``fsdp_units()`` is empty) or none of them occurs in it.
    """
    import torch

    declared = tuple(model.fsdp_units())
    if not declared:
        raise UsageError(f"--compile: {type(model).__name__} declares no blocks (its fsdp_units() is empty), and "
                         "--compile compiles each block on its own; declare the model's transformer block classes "
                         "in fsdp_units(), or train without --compile")
    blocks = _outermost([(n, m) for n, m in model.named_modules() if n and isinstance(m, declared)])
    if not blocks:
        raise UsageError(f"--compile: {type(model).__name__}.fsdp_units() names "
                         f"{', '.join(c.__name__ for c in declared)}, but the model holds no instance of them")
    for _, block in blocks:
        if getattr(block, _COMPILED_ATTR, False):
            continue
        static = getattr(block, _STATIC_ATTR, False)
        block.forward = torch.compile(block.forward, mode=None if mode == "default" else mode,
                                      dynamic=False if static else None)
        setattr(block, _COMPILED_ATTR, True)
    return CompileReport(mode=mode, blocks=tuple(n for n, _ in blocks),
                         classes=tuple(sorted({type(m).__name__ for _, m in blocks})),
                         static_blocks=tuple(n for n, m in blocks if getattr(m, _STATIC_ATTR, False)))


def compiled_block_names(model: nn.Module) -> list[str]:
    """Names of the modules of ``model`` whose forward :func:`compile_blocks` compiled."""
    return [name for name, module in model.named_modules() if getattr(module, _COMPILED_ATTR, False)]


def _has_cpp_compiler() -> bool:
    """Whether inductor's CPU backend finds a C++ compiler (it builds its kernels with one)."""
    import os

    return any(shutil.which(c) for c in (os.environ.get("CXX", ""), "g++", "c++", "clang++") if c)


def compile_problems(args: TrainingArgs, *, cuda: bool, world_size: int) -> list[str]:
    """Usage problems of ``--compile`` / ``--compile-mode`` (empty when all is well); run before anything heavy."""
    if not args.compile:
        if args.compile_mode != "default":
            return [f"--compile-mode {args.compile_mode}: read only with --compile; add --compile or drop it"]
        return []
    problems = []
    if args.compile_mode in _CUDA_GRAPH_MODES:
        if not cuda:
            problems.append(f"--compile-mode {args.compile_mode}: captures CUDA graphs and no CUDA device is "
                            "available; use --compile-mode default or max-autotune-no-cudagraphs")
        elif args.distributed_strategy == "fsdp" and world_size > 1:
            problems.append(f"--compile-mode {args.compile_mode} with --distributed-strategy fsdp: CUDA graphs "
                            "cannot capture blocks whose parameters FSDP gathers and frees around every call; "
                            "use --compile-mode default or max-autotune-no-cudagraphs")
    if not cuda and not _has_cpp_compiler():
        problems.append("--compile on CPU: torch.compile (inductor) builds C++ kernels and no C++ compiler was "
                        "found (g++, c++, clang++ or $CXX); install one (apt-get install g++) or drop --compile")
    return problems
