"""Process-wide runtime settings of a run: determinism, TF32, manual garbage collection, loss scaling.

:class:`RuntimeSettings` applies ``--deterministic-mode``, ``--disable-tf32`` and ``--manual-gc`` at setup
and restores the previous global state when the run ends, so the programmatic ``Trainer`` API leaves the
interpreter as it found it.
"""

from __future__ import annotations

import gc
import logging
import os
from typing import Any

import torch

from embodied_core.config.training_args import TrainingArgs

__all__ = ["RuntimeSettings", "make_grad_scaler"]

logger = logging.getLogger("embodied.train")

_CUBLAS_ENV = "CUBLAS_WORKSPACE_CONFIG"


class RuntimeSettings:
    """Applies and later restores the global torch/gc settings the flags ask for."""

    def __init__(self, args: TrainingArgs) -> None:
        self.args = args
        self._saved: dict[str, Any] | None = None

    def apply(self) -> None:
        """Sets determinism, TF32 and GC as requested (remembering the previous values)."""
        args = self.args
        self._saved = {
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "gc_enabled": gc.isenabled(),
            "cublas_env": os.environ.get(_CUBLAS_ENV),
        }
        if args.deterministic_mode:
            # cuBLAS needs a fixed workspace for reproducible results; it reads the variable when a handle
            # is created, which happens after this point (no matmul has run on the device yet).
            os.environ.setdefault(_CUBLAS_ENV, ":4096:8")
            torch.use_deterministic_algorithms(True)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
        # TF32 is on unless disabled (FLAGS.md); the legacy switches are used because mixing them with the
        # newer fp32_precision API makes torch raise when other code reads either.
        torch.backends.cuda.matmul.allow_tf32 = not args.disable_tf32
        torch.backends.cudnn.allow_tf32 = not args.disable_tf32
        if args.manual_gc:
            gc.disable()
            gc.collect()

    def on_step_end(self, step: int) -> None:
        """Collects garbage every ``--manual-gc-interval`` steps under ``--manual-gc``."""
        interval = self.args.manual_gc_interval
        if self.args.manual_gc and interval and step % interval == 0:
            gc.collect()

    def restore(self) -> None:
        """Puts back the settings found by :meth:`apply` (a final collection under ``--manual-gc``)."""
        saved, self._saved = self._saved, None
        if saved is None:
            return
        if self.args.manual_gc:
            gc.collect()
        if saved["gc_enabled"]:
            gc.enable()
        torch.use_deterministic_algorithms(saved["deterministic"])
        torch.backends.cudnn.deterministic = saved["cudnn_deterministic"]
        torch.backends.cudnn.benchmark = saved["cudnn_benchmark"]
        torch.backends.cuda.matmul.allow_tf32 = saved["matmul_tf32"]
        torch.backends.cudnn.allow_tf32 = saved["cudnn_tf32"]
        if saved["cublas_env"] is None:
            os.environ.pop(_CUBLAS_ENV, None)


def make_grad_scaler(args: TrainingArgs, device: torch.device) -> torch.amp.GradScaler | None:
    """A GradScaler for ``--dtype float16`` (its loss scale keeps small float16 gradients from flushing to
    zero); None for bfloat16 and float32, which need none."""
    if args.dtype != "float16":
        return None
    return torch.amp.GradScaler(device.type)
