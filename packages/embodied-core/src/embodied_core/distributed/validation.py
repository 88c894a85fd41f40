"""Validation of the launch environment and the distributed flags (no torch import).

Runs inside :func:`embodied_core.validation.validate_run_config`, so every rank checks the same
things before any process group, model or dataset exists, and each problem names the flag or variable
and how to fix it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import attrs

from embodied_core.config.training_args import TrainingArgs

__all__ = ["DDP_KEYWORDS", "LaunchEnv", "distributed_problems", "launch_env", "launch_problems",
           "parse_reshard_overrides", "shard_group_size"]

_REQUIRED = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_INT_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT", "GROUP_WORLD_SIZE")

DDP_FLAGS = ("zero_optimizer", "ddp_find_unused_parameters", "ddp_static_graph", "ddp_gradient_as_bucket_view",
             "ddp_bucket_cap_mb", "zero_parameters_as_bucket_view", "zero_master_param_dtype",
             "ddp_bucket_cap_mb_list", "ddp_broadcast_buffers", "ddp_init_sync", "ddp_skip_all_reduce_unused_params",
             "ddp_batched_grad_copy", "ddp_comm_hook", "ddp_comm_hook_logging", "dynamo_optimize_ddp")
"""Flags read only by ``--distributed-strategy ddp``."""
FSDP_FLAGS = ("hsdp_shard_size", "fsdp_reshard_default", "fsdp_reshard_root", "fsdp_wrap_modules",
              "fsdp_no_wrap_modules", "fsdp_min_num_params", "fsdp_leftover_min_num_params",
              "fsdp_original_param_dtype", "fsdp_unsharded_param_dtype", "fsdp_reduce_dtype",
              "fsdp_cast_forward_inputs", "fsdp_reduce_every_microbatch", "fsdp_reshard_module_overrides",
              "fsdp_forward_prefetch_distance", "fsdp_backward_prefetch_distance")
"""Flags read only by ``--distributed-strategy fsdp``."""
DDP_KEYWORDS = {"ddp_broadcast_buffers": "broadcast_buffers", "ddp_init_sync": "init_sync",
                "ddp_skip_all_reduce_unused_params": "skip_all_reduce_unused_params",
                "ddp_bucket_cap_mb_list": "bucket_cap_mb_list", "ddp_batched_grad_copy": "batched_grad_copy"}
"""Flag -> the ``DistributedDataParallel`` keyword argument it sets (all five exist in torch 2.13)."""
_RESHARD_WORDS = {"true": True, "false": False, "none": None}


@attrs.frozen
class LaunchEnv:
    """Where this process sits in a torchrun-style launch.

    Attributes:
        rank, world_size: global rank and number of processes.
        local_rank, local_world_size: rank on this node and processes per node.
        num_nodes: number of nodes (torchrun's GROUP_WORLD_SIZE, else world_size // local_world_size).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    num_nodes: int = 1


def launch_problems(environ: Mapping[str, str] | None = None) -> list[str]:
    """Problems of a half-set or inconsistent launch environment (empty when it is usable)."""
    environ = os.environ if environ is None else environ
    problems = []
    for name in _INT_VARS:
        if name in environ:
            try:
                int(environ[name])
            except ValueError:
                problems.append(f"environment {name}={environ[name]!r} is not an integer")
    if problems:
        return problems
    multi = int(environ.get("WORLD_SIZE", "1")) > 1 or "RANK" in environ
    if not multi:
        return []
    missing = [name for name in _REQUIRED if name not in environ]
    if missing:
        present = ", ".join(f"{n}={environ[n]}" for n in (*_REQUIRED, "LOCAL_RANK") if n in environ)
        problems.append(f"half-set launch environment: {present} but {', '.join(missing)} missing; launch with "
                        "torchrun (which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or set all "
                        "of them, or unset them to run a single process")
        return problems
    rank, world_size = int(environ["RANK"]), int(environ["WORLD_SIZE"])
    if not 0 <= rank < world_size:
        problems.append(f"environment RANK={rank} is outside WORLD_SIZE={world_size}")
    local_world = int(environ.get("LOCAL_WORLD_SIZE", world_size))
    if local_world < 1 or world_size % local_world:
        problems.append(f"environment LOCAL_WORLD_SIZE={local_world} does not divide WORLD_SIZE={world_size}")
    local_rank = int(environ.get("LOCAL_RANK", rank % max(local_world, 1)))
    if not 0 <= local_rank < max(local_world, 1):
        problems.append(f"environment LOCAL_RANK={local_rank} is outside LOCAL_WORLD_SIZE={local_world}")
    return problems


def launch_env(environ: Mapping[str, str] | None = None) -> LaunchEnv:
    """The launch environment (assumes :func:`launch_problems` found nothing)."""
    environ = os.environ if environ is None else environ
    world_size = int(environ.get("WORLD_SIZE", "1"))
    if world_size == 1 and "RANK" not in environ:
        return LaunchEnv()
    rank = int(environ["RANK"])
    local_world = int(environ.get("LOCAL_WORLD_SIZE", world_size))
    num_nodes = int(environ.get("GROUP_WORLD_SIZE", world_size // local_world))
    return LaunchEnv(rank=rank, world_size=world_size, local_rank=int(environ.get("LOCAL_RANK", rank % local_world)),
                     local_world_size=local_world, num_nodes=num_nodes)


def shard_group_size(args: TrainingArgs, env: LaunchEnv) -> int:
    """Processes that shard one copy of the model under FSDP: ``--hsdp-shard-size`` or the world size.

    ``auto`` means the processes of one node when there are several nodes (HSDP: shard inside a node,
    replicate across nodes), and the whole world on one node.
    """
    size = args.hsdp_shard_size
    if size is None:
        return env.world_size
    if size == "auto":
        return env.local_world_size if env.num_nodes > 1 else env.world_size
    return int(size)


def parse_reshard_overrides(text: str | None) -> dict[str, bool | int | None]:
    """``"Block=false,Encoder=2"`` -> ``{"Block": False, "Encoder": 2}`` (``--fsdp-reshard-module-overrides``).

    Raises:
        ValueError: an item that is not ``Class=value`` with value true, false, none or an integer > 1.
    """
    out: dict[str, bool | int | None] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, eq, raw = (part.strip() for part in item.partition("="))
        value = raw.lower()
        if not eq or not name.isidentifier() or not (value in _RESHARD_WORDS or (value.isdigit() and int(value) > 1)):
            raise ValueError(f"{item.strip()!r}: expected Class=value with value true, false, none or an integer > 1")
        out[name] = _RESHARD_WORDS[value] if value in _RESHARD_WORDS else int(value)
    return out


def _ddp_keyword_problems(args: TrainingArgs) -> list[str]:
    """A DDP keyword flag set away from its default on a torch whose DDP lacks the keyword: never dropped silently."""
    changed = {name: kw for name, kw in DDP_KEYWORDS.items() if getattr(args, name) != _default(name)}
    if not changed:
        return []
    import inspect

    import torch
    from torch.nn.parallel import DistributedDataParallel

    accepted = inspect.signature(DistributedDataParallel.__init__).parameters
    return [f"--{name.replace('_', '-')}: this torch ({torch.__version__}) has no DistributedDataParallel({kw}=...); "
            f"it needs torch >= 2.13 (the version these flags were written against), or leave the flag at its default"
            for name, kw in changed.items() if kw not in accepted]


def _default(field: str) -> object:
    default = attrs.fields_dict(TrainingArgs)[field].default
    return default.factory() if isinstance(default, attrs.Factory) else default  # type: ignore[attr-defined]


def _overrides_or_empty(args: TrainingArgs) -> dict[str, bool | int | None]:
    try:
        return parse_reshard_overrides(args.fsdp_reshard_module_overrides)
    except ValueError:
        return {}  # reported above


def distributed_problems(args: TrainingArgs, environ: Mapping[str, str] | None = None) -> list[str]:
    """Problems of the distributed flags for this launch (env problems first)."""
    problems = launch_problems(environ)
    if problems:
        return problems
    env = launch_env(environ)
    strategy = args.distributed_strategy
    flag = lambda name: "--" + name.replace("_", "-")  # noqa: E731
    foreign = {"ddp": FSDP_FLAGS, "fsdp": DDP_FLAGS}.get(strategy, ())
    for name in foreign:
        if hasattr(args, name) and getattr(args, name) != _default(name):
            problems.append(f"{flag(name)}: not read by --distributed-strategy {strategy} (it belongs to "
                            f"{'fsdp' if name in FSDP_FLAGS else 'ddp'})")
    if strategy == "ddp":
        problems.extend(_ddp_keyword_problems(args))
    if args.ddp_comm_hook_logging and args.ddp_comm_hook is None:
        problems.append("--ddp-comm-hook-logging logs what --ddp-comm-hook does, and none is set; add --ddp-comm-hook")
    try:
        parse_reshard_overrides(args.fsdp_reshard_module_overrides)
    except ValueError as exc:
        problems.append(f"--fsdp-reshard-module-overrides: {exc}")
    if strategy == "single" and env.world_size > 1:
        problems.append(f"--distributed-strategy single with WORLD_SIZE={env.world_size}: every process would train "
                        "its own copy; use ddp or fsdp (one process runs unwrapped with either)")
    if args.zero_master_param_dtype == "fp32":
        if not args.zero_optimizer:
            problems.append("--zero-master-param-dtype fp32 needs --zero-optimizer (master copies live in the "
                            "ZeRO-1 optimizer shards)")
        if args.dtype == "float32":
            problems.append("--zero-master-param-dtype fp32 keeps fp32 masters of parameters stored in --dtype; "
                            "with --dtype float32 they already are fp32: drop the flag or use --dtype bfloat16")
    if strategy != "fsdp" or env.world_size == 1:
        return problems  # one process runs unwrapped: the topology rules below do not apply
    if args.hsdp_shard_size not in (None, "auto") and env.world_size % int(args.hsdp_shard_size):
        problems.append(f"--hsdp-shard-size {args.hsdp_shard_size} does not divide the world size "
                        f"{env.world_size}; valid: the divisors of {env.world_size}, or 'auto'")
        return problems
    shard = shard_group_size(args, env)
    policies = [(f"{flag(n)} {getattr(args, n)}", getattr(args, n))
                for n in ("fsdp_reshard_default", "fsdp_reshard_root")]
    policies += [(f"--fsdp-reshard-module-overrides {k}={v}", v) for k, v in _overrides_or_empty(args).items()]
    for label, value in policies:
        if isinstance(value, int) and not isinstance(value, bool) and shard % value:
            valid = [d for d in range(2, shard + 1) if shard % d == 0]
            problems.append(f"{label}: an integer reshards to groups of that size and must divide "
                            f"the shard group size {shard}; valid integers: {valid or 'none'} (or true/false/none)")
    return problems
