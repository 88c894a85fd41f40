"""Validation of the trainer's own flags, run with every other check before anything heavy is built.

Called directly by :func:`embodied_core.validation.validate_run_config` for every run. Imports torch only for
the flags that need the device (fused optimizers).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import attrs

from embodied_core.config.run_config import RunConfig
from embodied_core.config.training_args import TrainingArgs

__all__ = ["check_trainer_flags", "fused_adamw_devices"]

_CUDA_ONLY_OPTIMIZERS = {"TEFusedAdamW": "transformer_engine", "ApexFusedAdamW": "apex"}


def fused_adamw_devices() -> list[str]:
    """Device types for which this torch build has a fused AdamW kernel."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
    except ImportError:  # private helper moved: fall back to the device types fused AdamW is known for
        return ["cuda"]
    return list(_get_fused_kernels_supported_devices())


def _training_device_type() -> str:
    import torch

    # The single-process strategy trains on CUDA when present, else on CPU (strategies/base.py).
    return "cuda" if torch.cuda.is_available() else "cpu"


def _check_optimizer(args: TrainingArgs) -> list[str]:
    if args.optimizer == "TorchFusedAdamW":
        import torch

        device = _training_device_type()
        supported = fused_adamw_devices()
        if device not in supported:
            return [f"--optimizer TorchFusedAdamW: torch {torch.__version__} has no fused AdamW kernel for "
                    f"{device} (supported: {', '.join(supported)}); use --optimizer AdamW"]
    elif args.optimizer in _CUDA_ONLY_OPTIMIZERS:
        import torch

        if not torch.cuda.is_available():
            return [f"--optimizer {args.optimizer}: runs only on CUDA and no CUDA device is available; use "
                    "--optimizer AdamW or TorchFusedAdamW"]
    return []


def _check_schedule(args: TrainingArgs) -> list[str]:
    problems = []
    if args.lr_num_cycles != 1 and args.lr_decay_style != "cosine_with_restarts":
        problems.append(f"--lr-num-cycles {args.lr_num_cycles:g}: read only by --lr-decay-style cosine_with_restarts "
                        f"(got {args.lr_decay_style})")
    if args.lr_decay_power != 1.0 and args.lr_decay_style != "polynomial":
        problems.append(f"--lr-decay-power {args.lr_decay_power}: read only by --lr-decay-style polynomial "
                        f"(got {args.lr_decay_style})")
    if args.lr_end != _default("lr_end") and args.lr_decay_style != "polynomial":
        problems.append(f"--lr-end {args.lr_end}: read only by --lr-decay-style polynomial (got {args.lr_decay_style})")
    if args.lr_decay_style == "lambda_linear":
        if args.lr_warmup_iters >= args.lambda_cycle_length:
            problems.append(f"--lr-decay-style lambda_linear: --lr-warmup-iters {args.lr_warmup_iters} must be "
                            f"shorter than the cycle length --lambda-cycle-length {args.lambda_cycle_length}")
    else:
        problems += [f"--{name.replace('_', '-')} {getattr(args, name)}: read only by --lr-decay-style lambda_linear "
                     f"(got {args.lr_decay_style})" for name in _LAMBDA_FLAGS if getattr(args, name) != _default(name)]
    return problems


_LAMBDA_FLAGS = ("lambda_f_max", "lambda_f_min", "lambda_f_start", "lambda_cycle_length")


def _default(name: str) -> object:
    return attrs.fields_dict(TrainingArgs)[name].default


def _check_files_and_packages(args: TrainingArgs) -> list[str]:
    problems = []
    if args.pretrained_checkpoint and not Path(args.pretrained_checkpoint).exists():
        problems.append(f"--pretrained-checkpoint {args.pretrained_checkpoint}: no such file or directory")
    if args.wandb_mode != "disabled" and importlib.util.find_spec("wandb") is None:
        problems.append(f"--wandb-mode {args.wandb_mode}: needs the package wandb (pip install wandb, or "
                        "embodied-core[wandb]); or use --wandb-mode disabled")
    if args.tensorboard_dir and importlib.util.find_spec("tensorboard") is None:
        problems.append(f"--tensorboard-dir {args.tensorboard_dir}: needs the package tensorboard (pip install "
                        "tensorboard, or embodied-core[tensorboard])")
    if args.save_total_limit is not None and args.save_interval == 0:
        problems.append(f"--save-total-limit {args.save_total_limit}: has no effect with --save-interval 0 "
                        "(saving disabled)")
    return problems


def _check_profiling(args: TrainingArgs) -> list[str]:
    if not (args.use_pytorch_profiler or args.use_nsys_profiler):
        return []
    import torch

    from embodied_core.config.validate import world_size_from_env
    from embodied_core.trainer.profiling import profiler_problems

    return profiler_problems(args, world_size=world_size_from_env(), cuda=torch.cuda.is_available())


def _check_memory(args: TrainingArgs) -> list[str]:
    from embodied_core.config.validate import world_size_from_env

    sharded = args.distributed_strategy == "fsdp" and world_size_from_env() > 1
    if args.init_on_meta and args.use_lora and sharded:
        return ["--init-on-meta with --use-lora under FSDP: the LoRA base weights are loaded before the adapters are "
                "injected, and sharding comes after both; drop --init-on-meta, or train with "
                "--distributed-strategy ddp (it materializes the model on the device before LoRA)"]
    return []


def _check_compile(args: TrainingArgs) -> list[str]:
    if not args.compile and args.compile_mode == "default":
        return []
    from embodied_core.config.validate import world_size_from_env
    from embodied_core.trainer.compile import compile_problems

    return compile_problems(args, cuda=_training_device_type() == "cuda", world_size=world_size_from_env())


def check_trainer_flags(config: RunConfig) -> list[str]:
    """Problems with the optimizer, schedule, checkpoint, logger, profiler and compile flags (empty when all is
    well)."""
    args = config.training
    return [*_check_optimizer(args), *_check_schedule(args), *_check_files_and_packages(args),
            *_check_profiling(args), *_check_memory(args), *_check_compile(args)]
