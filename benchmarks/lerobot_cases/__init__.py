"""The models ``benchmarks/vs_lerobot.py`` and ``benchmarks/inference_latency.py`` measure next to lerobot 0.6.1.

One module per model. Each builds the same network twice: lerobot's module (in the side venv ``.venv-lerobot``,
which has no embodied package) and ours (in our venv), at a named size, and gives both a training step's loss
on the same inputs and draws. lerobot's side runs first and writes its ``state_dict`` (and, where lerobot has
one, its config file); ours loads that file through our strict loader, so the weights are lerobot's.

A case module provides (see :class:`Case`):

- ``SIZES``: size name -> the numbers that size is built from (``tiny`` for smoke tests, ``mid`` where the
  matmuls dominate the step);
- ``describe(size)``: one line naming the shape;
- ``make_inputs(size)``: the batch and fixed draws, from a seeded CPU generator (torch only);
- ``lerobot_side(size, inputs, work, device, compile_model=...)`` / ``our_side(size, inputs, work, device)``:
  a :class:`Side`; ``LEROBOT_COMPILE`` says whether lerobot has its own compile switch for this model;
- optionally ``trains_on(device)``: False where lerobot's module cannot run backward there (lingbot_va on CPU:
  flex attention has no CPU backward); both sides then time the forward only.

Nothing heavy is imported here; torch, lerobot and our packages are imported inside the case functions of their side.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

MODELS = ("pi05", "smolvla", "xvla", "groot_n1_7", "fastwam", "lingbot_va")


@dataclass
class Side:
    """One side of a comparison, ready to step.

    Attributes:
        model: the module whose trainable parameters the optimizer updates.
        loss: step index -> the scalar training loss of that step. The runner seeds torch's global RNG with
            ``step_seed(step)`` just before the call; draws a side makes itself must come from there (or, for
            ours, be computed from it in lerobot's order), so both sides see the same noise and time.
        train_mode: the module's mode during the step; False (eval: dropout off, autograd still on) where a
            side has dropout the other cannot draw alike (lerobot's fixed dropout in X-VLA's transformer).
        compiled: what compilation lerobot's side got from its own switch ("" when eager; ours is compiled by
            the runner with the trainer's ``compile_blocks``).
        compile_target: the model plugin ``compile_blocks`` compiles for ours when ``model`` is a part of it (the
            GR00T head); None: ``model``.
        predict: optional inference callable (used by ``inference_latency.py``): returns the action chunk.
        notes: free-form remarks printed with the results.
    """

    model: Any
    loss: Callable[[int], Any]
    train_mode: bool = True
    compiled: str = ""
    compile_target: Any = None
    predict: Callable[[], Any] | None = None
    notes: list[str] = field(default_factory=list)


class Case(Protocol):
    """What a case module provides (module-level names)."""

    SIZES: dict[str, dict[str, Any]]
    LEROBOT_COMPILE: bool

    def describe(self, size: dict[str, Any]) -> str: ...

    def make_inputs(self, size: dict[str, Any]) -> dict[str, Any]: ...

    def lerobot_side(self, size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any, *,
                     compile_model: bool) -> Side: ...

    def our_side(self, size: dict[str, Any], inputs: dict[str, Any], work: Path, device: Any) -> Side: ...


def step_seed(step: int) -> int:
    """The global seed set before step ``step`` on both sides."""
    return 1000 + step


def load_case(name: str) -> ModuleType:
    """The case module of ``name`` (one of :data:`MODELS`)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return importlib.import_module(f"benchmarks.lerobot_cases.{name}")
