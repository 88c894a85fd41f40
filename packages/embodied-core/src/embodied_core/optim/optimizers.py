"""Optimizer factories (group ``embodied.optimizers``).

Each factory is ``build(param_groups, args) -> torch.optim.Optimizer``; ``param_groups`` carry their own
``lr`` and ``weight_decay`` (see :mod:`embodied_core.optim.param_groups`). Betas and epsilon come from
``--adam-beta1/--adam-beta2/--adam-eps``, momentum from ``--sgd-momentum``.

The fused variants depend on the device and on optional packages; :mod:`embodied_core.optim.checks`
validates them before anything is built, and the factories still turn a late failure into an error that
names the fix.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError

__all__ = ["build_adam", "build_adamw", "build_apex_fused_adamw", "build_sgd", "build_te_fused_adamw",
           "build_torch_fused_adamw"]


def _adam_kwargs(args: TrainingArgs) -> dict[str, Any]:
    return {"lr": args.lr_base, "betas": (args.adam_beta1, args.adam_beta2), "eps": args.adam_eps,
            "weight_decay": args.weight_decay}


def build_adamw(param_groups: list[dict[str, Any]], args: TrainingArgs) -> torch.optim.Optimizer:
    """``torch.optim.AdamW`` (foreach implementation)."""
    return torch.optim.AdamW(param_groups, **_adam_kwargs(args))


def build_adam(param_groups: list[dict[str, Any]], args: TrainingArgs) -> torch.optim.Optimizer:
    """``torch.optim.Adam``; weight decay is L2 (coupled), as in torch."""
    return torch.optim.Adam(param_groups, **_adam_kwargs(args))


def build_sgd(param_groups: list[dict[str, Any]], args: TrainingArgs) -> torch.optim.Optimizer:
    """``torch.optim.SGD`` with ``--sgd-momentum``."""
    return torch.optim.SGD(param_groups, lr=args.lr_base, momentum=args.sgd_momentum,
                           weight_decay=args.weight_decay)


def build_torch_fused_adamw(param_groups: list[dict[str, Any]], args: TrainingArgs) -> torch.optim.Optimizer:
    """``torch.optim.AdamW(fused=True)``: one fused kernel per step (CUDA, and CPU in recent torch).

    Raises:
        ConfigError: torch has no fused AdamW kernel for the parameters' device or dtype.
    """
    try:
        return torch.optim.AdamW(param_groups, fused=True, **_adam_kwargs(args))
    except (RuntimeError, ValueError) as exc:
        devices = sorted({str(p.device) for g in param_groups for p in g["params"]})
        dtypes = sorted({str(p.dtype) for g in param_groups for p in g["params"]})
        raise ConfigError(f"--optimizer TorchFusedAdamW: torch {torch.__version__} has no fused AdamW for "
                          f"parameters on {', '.join(devices)} with dtype {', '.join(dtypes)} ({exc}); use "
                          "--optimizer AdamW") from exc


def _import_optional(module: str, optimizer: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"--optimizer {optimizer}: needs the package {package}, which cannot be imported "
                          f"({exc}); install it or use --optimizer TorchFusedAdamW") from exc


def _require_cuda(param_groups: list[dict[str, Any]], optimizer: str) -> None:
    devices = sorted({p.device.type for g in param_groups for p in g["params"]})
    if devices and devices != ["cuda"]:
        raise ConfigError(f"--optimizer {optimizer}: runs only on CUDA parameters (found {', '.join(devices)}); "
                          "use --optimizer AdamW or TorchFusedAdamW")


def build_te_fused_adamw(param_groups: list[dict[str, Any]], args: TrainingArgs) -> torch.optim.Optimizer:
    """Transformer Engine's ``FusedAdam`` in AdamW mode (decoupled weight decay); CUDA only."""
    _require_cuda(param_groups, "TEFusedAdamW")
    te_optimizers = _import_optional("transformer_engine.pytorch.optimizers", "TEFusedAdamW", "transformer_engine")
    return te_optimizers.FusedAdam(param_groups, adam_w_mode=True, **_adam_kwargs(args))


def build_apex_fused_adamw(param_groups: list[dict[str, Any]], args: TrainingArgs) -> torch.optim.Optimizer:
    """NVIDIA Apex's ``FusedAdam`` in AdamW mode (decoupled weight decay); CUDA only."""
    _require_cuda(param_groups, "ApexFusedAdamW")
    apex_optimizers = _import_optional("apex.optimizers", "ApexFusedAdamW", "apex")
    return apex_optimizers.FusedAdam(param_groups, adam_w_mode=True, **_adam_kwargs(args))
