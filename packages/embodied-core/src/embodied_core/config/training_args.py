"""``TrainingArgs``: every flag of ``embodied train`` (contract: ../shared/FLAGS.md), with its default.

Field docstrings are shown by ``embodied train --help``. Single-field rules live in validators here;
rules that span fields or need the registry live in :mod:`embodied_core.config.validate`.
"""

from __future__ import annotations

from typing import Literal

import attrs

from embodied_core.config.validators import non_negative, positive, probability

__all__ = ["ALIASES_KEY", "ReshardPolicy", "TrainingArgs"]

ALIASES_KEY = "aliases"
"""Field metadata key: other spellings of the flag (LoongForge's names) that map onto it exactly."""

ReshardPolicy = bool | int | None
"""FSDP reshard-after-forward policy: True, False, None (FSDP's default), or an int divisor of the shard size."""




def _reshard(instance: object, attribute: attrs.Attribute, value: ReshardPolicy) -> None:
    if isinstance(value, bool) or value is None:
        return
    if not value > 1:
        raise ValueError(f"must be true, false, none or an integer > 1 (got {value!r})")


def _hsdp(instance: object, attribute: attrs.Attribute, value: int | str | None) -> None:
    if value is None or value == "auto":
        return
    if isinstance(value, str) or not value > 0:
        raise ValueError(f"must be a positive integer or 'auto' (got {value!r})")


@attrs.define(kw_only=True)
class TrainingArgs:
    """Flags of ``embodied train``."""

    # --- Model and config selection ---
    model_name: str | None = None
    """Model plugin to train (see `embodied plugins --group models`); selects its ModelConfig, DataConfig
    and default YAML. Required, also with --config-file."""
    config_file: str | None = None
    """YAML file replacing the model's default YAML (`model:` / `data:` / `training:` sections)."""
    tokenizer_path: str | None = None
    """Tokenizer location (local directory, or a hub id when a hub client is installed); also exported as
    the environment variable TOKENIZER_PATH."""
    trainer_type: str = "FinetuneTrainer"
    """Trainer plugin that runs the loop (group embodied.trainers). Keep FinetuneTrainer unless a model asks for
    its own (lingbot_va needs --trainer-type lingbot_va to seed and checkpoint its noise generator)."""

    # --- Data ---
    dataset_format: str = "lerobot_datasets"
    """Dataset reader (plugin group embodied.dataset_formats): lerobot_datasets, hdf5_datasets, dummy_datasets."""
    dataset_path: str | None = None
    """Dataset root folder (LeRobot: the folder holding meta/info.json; HDF5: the .hdf5 file). Required by every
    format except dummy_datasets."""
    dataset_mixture: str | None = None
    """YAML file of a dataset mixture: several datasets with sampling weights, each with its own data flags
    (the run's data_mixture: section; see embodied_core.config.mixture). Excludes --dataset-path."""
    split: str = "train"
    """Split to read (LeRobot `splits` in info.json, HDF5 masks)."""
    num_samples: int = attrs.field(default=100, validator=positive)
    """Number of random samples dummy_datasets generates (the epoch length); read only by dummy_datasets."""
    lerobotdataset_version: Literal["v2.0", "v2.1", "v3.0"] = "v3.0"
    """On-disk LeRobot version expected; a mismatch with info.json is an error saying which it is."""
    dataset_strategy: str = "default"
    """How samples are built from a LeRobot dataset (plugin group embodied.dataset_strategies): time offsets,
    key layout and index map. Change it only when the model needs it (e.g. lingbot_va's latent caches)."""
    video_backend: str = "torchcodec"
    """Library that decodes video frames (plugin group embodied.video_backends). Change it when the default's
    package is missing or cannot decode the dataset's codec (pyav decodes nearly everything)."""
    robot_type: str | None = None
    """Embodiment: selects the action/state layout."""
    num_workers: int = attrs.field(default=4, validator=non_negative)
    """DataLoader worker processes per rank (0 loads in the training process). Raise it when data loading shows
    up in the step timings; each worker holds its own video decoders."""
    dataloader_seed_workers: bool = False
    """Seed each DataLoader worker's Python, NumPy and torch RNGs from --seed, the epoch and the worker id, so
    random augmentations in workers repeat across runs."""
    dataloader_multiprocessing_context: Literal["fork", "spawn", "forkserver"] | None = None
    """How DataLoader workers are started; None uses the platform default (fork on Linux). Use spawn or
    forkserver when a library in the training process is not fork-safe."""
    distributed_sampler_mode: str = "cyclic"
    """How sample indices are split over ranks (plugin group embodied.samplers): cyclic or block."""
    streaming: bool = False
    """Read the dataset as an iterable (streaming) dataset."""
    data_root_dir: str | None = None
    """Directory a relative --dataset-path is resolved against (None: the working directory). An absolute
    --dataset-path is used as it is."""
    task_name: str = "perform the task"
    """Task string a sample gets when its dataset has no task / language annotation for it (no task, or an
    empty one); samples with a task keep theirs."""
    sampler_shuffle: bool = True
    """Shuffle the sample order each epoch (seeded by --seed and the epoch); --no-sampler-shuffle reads the
    dataset in its own order (split over ranks by --distributed-sampler-mode)."""
    batch_drop_last: bool = False
    """Drop the last incomplete batch of each epoch on every rank. Off (the default), the epoch ends with a
    smaller batch; every rank holds the same number of samples, so the ranks stay in step either way."""
    record_augmentation_draws: int = attrs.field(default=0, validator=non_negative)
    """Write the image augmentation draws (ops and parameters per camera) of the first N training samples to
    <output-dir>/augmentation_draws.jsonl, next to metrics.jsonl, to see what data.image_augmentation applies
    (0: none). Needs data.image_augmentation."""

    # --- Training basics ---
    train_iters: int = attrs.field(default=150000, validator=positive)
    """Length of training in optimizer update steps (each update is --gradient-accumulation-steps
    micro-batches); also the default LR decay length."""
    per_device_batch_size: int = attrs.field(default=4, validator=positive)
    """Micro-batch size per rank. Global batch = this x world size x gradient accumulation steps."""
    gradient_accumulation_steps: int = attrs.field(default=1, validator=positive)
    """Micro-batches whose gradients are summed before each optimizer update; raise it to grow the global batch
    when a bigger --per-device-batch-size does not fit in memory."""
    seed: int = 3047
    """Seed of model initialization, data order, augmentations and flow-matching noise; change it to get an
    independent run of the same configuration."""
    set_seed_by_rank: bool = False
    """Offset each rank's random streams by its rank after the model is built: sample augmentations and the
    model's noise draws differ between ranks, the initialization stays identical on every rank and the epoch
    order stays one permutation split over ranks (so ranks never read the same sample twice in an epoch)."""
    output_dir: str = "outputs/default"
    """Directory for config.yaml, metrics.jsonl, logs and checkpoints."""

    # --- Learning rate and optimizer ---
    lr_base: float = attrs.field(default=2.5e-5, validator=non_negative)
    """Learning rate of the default parameter group."""
    lr_decay_style: str = "cosine_with_min_lr"
    """LR schedule (plugin group embodied.lr_schedulers): linear, cosine, cosine_with_restarts, polynomial,
    constant, constant_with_warmup, inverse_sqrt, cosine_with_min_lr, cosine_warmup_with_min_lr, lambda_linear."""
    lr_warmup_iters: int = attrs.field(default=2000, validator=non_negative)
    """Updates during which the LR rises linearly to --lr-base (0 = no warmup); must be shorter than the decay
    length."""
    lr_decay_iters: int | None = attrs.field(default=None, validator=positive)
    """Decay length in steps; defaults to --train-iters."""
    min_lr: float = attrs.field(default=1e-6, validator=non_negative)
    """Absolute LR floor of the *_min_lr schedules (also the end LR of polynomial and the cycle floor of
    lambda_linear)."""
    lr_num_cycles: float = attrs.field(default=1.0, validator=positive,
                                       metadata={ALIASES_KEY: ("num_cycles",)})
    """Number of hard-restart cosine cycles of --lr-decay-style cosine_with_restarts (may be fractional).
    LoongForge's --num-cycles is an alias of this flag."""
    lr_decay_power: float = attrs.field(default=1.0, validator=positive,
                                        metadata={ALIASES_KEY: ("polynomial_power",)})
    """Power of --lr-decay-style polynomial (1.0 = linear decay to --lr-end). LoongForge's --polynomial-power is
    an alias of this flag."""
    lr_end: float = attrs.field(default=1e-7, validator=non_negative)
    """Final LR of --lr-decay-style polynomial (absolute, capped at each group's own peak LR)."""
    lambda_f_max: float = attrs.field(default=0.4, validator=non_negative)
    """--lr-decay-style lambda_linear: peak factor of each group's LR (reached at the end of each cycle's
    warmup)."""
    lambda_f_min: float = attrs.field(default=0.0, validator=non_negative)
    """--lr-decay-style lambda_linear: factor at the end of each cycle's decay."""
    lambda_f_start: float = attrs.field(default=0.0, validator=non_negative)
    """--lr-decay-style lambda_linear: factor at the start of each cycle's warmup (--lr-warmup-iters steps)."""
    lambda_cycle_length: int = attrs.field(default=10000, validator=positive)
    """--lr-decay-style lambda_linear: cycle length in updates; the cycles repeat for the whole run."""
    clip_grad: float = 1.0
    """Max global gradient norm; <= 0 measures the norm without clipping."""
    weight_decay: float = attrs.field(default=0.01, validator=non_negative)
    """Weight decay coefficient (decoupled for AdamW, L2 for Adam and SGD); 0 disables it. See
    --weight-decay-grouping for the parameters it skips."""
    weight_decay_grouping: Literal["all", "bias_norm"] = "all"
    """bias_norm: no weight decay for biases, norm weights and the model's no_weight_decay() names."""
    optimizer: str = "AdamW"
    """Optimizer (plugin group embodied.optimizers): AdamW, TorchFusedAdamW, TEFusedAdamW, ApexFusedAdamW, Adam, SGD."""
    adam_beta1: float = 0.9
    """Adam/AdamW (and Lion) decay rate of the first moment (gradient average); rarely changed."""
    adam_beta2: float = 0.999
    """Adam/AdamW decay rate of the second moment (squared-gradient average); lower it (e.g. 0.95) when large
    models show loss spikes."""
    adam_eps: float = attrs.field(default=1e-8, validator=positive)
    """Adam/AdamW term added to the denominator for numerical stability; raise it (e.g. 1e-6) if updates blow up
    in low precision."""
    sgd_momentum: float = attrs.field(default=0.9, validator=non_negative)
    """Momentum factor of --optimizer SGD (0 = plain SGD); read only by SGD."""
    lr_group: str | None = None
    """Per-module LR as 'module.path=lr,module.path=lr'; order-sensitive (child before parent); parameters
    matching no path use --lr-base; a path that matches nothing is an error."""

    # --- Checkpoints ---
    pretrained_checkpoint: str | None = None
    """Initialize model weights from this checkpoint (file or folder)."""
    resume: bool = False
    """Continue from the newest complete checkpoint under <output-dir>/checkpoints."""
    resume_from: str | None = None
    """Continue from this checkpoint directory (checkpoints/step_N)."""
    save_interval: int = attrs.field(default=10000, validator=non_negative)
    """Save a checkpoint every N updates (and at the end of training); 0 disables saving."""
    save_format: Literal["safetensors", "pt", "dcp"] = "safetensors"
    """File format of saved weights: safetensors (one file, no code executed on load), pt (torch.save) or dcp
    (torch.distributed.checkpoint: every rank writes its shards; use it with FSDP on many GPUs)."""
    save_training_state: bool = True
    """Also save optimizer, scheduler, RNG and DataLoader state (needed by --resume)."""
    save_total_limit: int | None = attrs.field(default=None, validator=positive)
    """Keep only the newest K checkpoints (None keeps all)."""
    async_save: bool = False
    """Write checkpoints in a background thread while training continues (needs --save-format dcp); the save
    is committed before the next one starts and at the end of training."""

    # --- Logging ---
    log_interval: int = attrs.field(default=1, validator=positive)
    """Log metrics every N steps."""
    detail_log_interval: int = attrs.field(default=20, validator=non_negative)
    """Log stage timings every N steps (0 disables)."""
    timing_log_level: Literal[0, 1] = 0
    """Detail of the stage timings logged every --detail-log-interval steps: 0 logs the mean over ranks, 1 adds
    every rank's own timings (to find a slow rank)."""
    wandb_project: str = "loongforge"
    """Weights & Biases project the run is logged to (with --wandb-mode online or offline)."""
    wandb_mode: Literal["online", "offline", "disabled"] = "disabled"
    """Weights & Biases logging: online (upload as it runs), offline (files under <output-dir>/wandb, upload
    later with `wandb sync`) or disabled."""
    tensorboard_dir: str | None = None
    """TensorBoard event directory; None disables TensorBoard."""
    tensorboard_queue_size: int = attrs.field(default=1000, validator=positive)
    """Events the TensorBoard writer queues before it writes them to disk (SummaryWriter max_queue)."""
    loss_log_rank: list[int] = attrs.field(factory=lambda: [-1])
    """Ranks whose loss is logged; -1 = mean over all ranks."""

    # --- Profiling ---
    use_pytorch_profiler: bool = False
    """Record torch.profiler traces (Chrome / TensorBoard format, with record_shapes and profile_memory) over the
    steps --profile-step-start..--profile-step-end on --profile-ranks."""
    use_nsys_profiler: bool = False
    """Bracket the steps --profile-step-start..--profile-step-end with cudaProfilerStart/Stop and one NVTX range
    per step, for `nsys profile --capture-range=cudaProfilerApi` (CUDA only; exclusive with
    --use-pytorch-profiler)."""
    profile_step_start: int = attrs.field(default=10, validator=positive)
    """First profiled update step (the absolute step number of metrics.jsonl, also after --resume)."""
    profile_step_end: int = attrs.field(default=12, validator=positive)
    """Last profiled update step (inclusive)."""
    profile_ranks: list[int] = attrs.field(factory=lambda: [0])
    """Ranks that profile (each writes its own trace); the other ranks run the window unprofiled."""
    profile_output_dir: str | None = None
    """Directory of the traces (default: <output-dir>/profiler); one file per rank."""

    # --- Memory ---
    activation_checkpoint_module_patterns: str | None = None
    """Comma-separated dotted module paths (named_modules()); `*` matches one path segment (`layers.*`). Each
    matched module recomputes its activations in backward (non-reentrant activation checkpointing), applied
    before DDP/FSDP wrapping; a pattern matching nothing is an error."""
    activation_checkpoint_skip_modules: str | None = None
    """Patterns (same syntax) of modules to leave without activation checkpointing among those
    --activation-checkpoint-module-patterns or the model's own gradient_checkpointing select (selective
    checkpointing); a pattern matching none of them is an error."""
    init_on_meta: bool = False
    """Build the model on the meta device (no memory), shard it (FSDP) or move it to the device (one process,
    DDP), materialize only this rank's shards with the model's own initialization, then stream
    --pretrained-checkpoint / --resume weights in a tensor at a time: no rank holds a full copy of the model
    on the host."""

    # --- Compilation ---
    compile: bool = False
    """Regional torch.compile: each block instance of the model's fsdp_units() is compiled on its own (one
    compiled graph reused by every block of a class), after LoRA and activation checkpointing and before
    DDP/FSDP wrapping; results equal eager up to float tolerance."""
    compile_mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    """torch.compile mode of --compile (reduce-overhead uses CUDA graphs: CUDA only, not with FSDP)."""

    # --- Freezing ---
    freeze_modules: str = ""
    """Comma-separated module paths (named_modules()) whose parameters are frozen; a path that matches
    nothing is an error."""

    # --- LoRA (PEFT) ---
    use_lora: bool = False
    """Inject LoRA adapters (PEFT) into the model after --pretrained-checkpoint is loaded and before freezing and
    wrapping; the base model is frozen, only the adapters (and --lora-modules-to-save) train. Checkpoints then
    hold the adapters in PEFT's format plus a reference to the base weights (needs embodied-core[lora])."""
    lora_r: int = attrs.field(default=16, validator=positive)
    """LoRA rank (PEFT `r`): the inner dimension of each adapter."""
    lora_alpha: int = attrs.field(default=32, validator=positive)
    """LoRA scaling alpha (PEFT `lora_alpha`); an adapter's update is scaled by alpha / r."""
    lora_dropout: float = attrs.field(default=0.0, validator=probability)
    """Dropout probability on the adapter input (PEFT `lora_dropout`); must be < 1."""
    lora_target_modules: str | None = None
    """Layers that get adapters: comma-separated module names (each matches a module path or its last
    dotted parts, PEFT's rule, e.g. `q_proj,v_proj`) or one regular expression matched against whole module
    paths (any value with characters other than letters, digits, `_`, `.` and `,`). None: the model's
    default_lora_targets(). Every target must be a Linear, Conv or Embedding layer."""
    lora_modules_to_save: str | None = None
    """Comma-separated module names (path or dotted suffix, like --lora-target-modules) trained in full next to
    the adapters (PEFT `modules_to_save`), e.g. a new action head; stored with the adapters."""
    lora_bias: Literal["none", "all", "lora_only"] = "none"
    """Which biases train (PEFT `bias`): none, all (every bias of the model), lora_only (the adapted layers')."""
    lora_init: str = "true"
    """Adapter initialisation (PEFT `init_lora_weights`): true (A Kaiming-uniform, B zero: a no-op at start),
    false (both random), gaussian, orthogonal (needs an even --lora-r), mica, pissa, pissa_niter_<K>, olora.
    pissa/olora move the principal part of each weight into the adapter; checkpoints store the adapter
    converted to a plain LoRA of rank 2r relative to the original base, so merging and loading stay exact."""

    # --- Distributed ---
    distributed_strategy: str = "fsdp"
    """Distributed strategy (plugin group embodied.distributed_strategies): ddp or fsdp. A single process
    runs without wrapping."""
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    """Training compute dtype (autocast; parameters and optimizer state stay float32)."""
    zero_optimizer: bool = False
    """DDP: shard optimizer state over ranks (ZeRO-1), dividing optimizer memory by the world size."""
    hsdp_shard_size: int | Literal["auto"] | None = attrs.field(default=None, validator=_hsdp)
    """FSDP: build a 2-D (replicate x shard) mesh with this shard size; 'auto' = processes per node."""
    distributed_timeout_minutes: float = attrs.field(default=10.0, validator=positive)
    """How long a collective waits for the other ranks before failing (init_process_group's timeout; Megatron's
    flag and default). A rank that dies is detected at once (its connections close) and named; this bounds the
    wait for one that hangs. Raise it when one rank does long work alone between collectives."""
    ddp_find_unused_parameters: bool = True
    """DDP: look for parameters that got no gradient in a step (needed when some modules are skipped, e.g.
    frozen or conditional branches); turn it off for speed when every parameter is used."""
    ddp_static_graph: bool = False
    """DDP: promise that the set of used parameters never changes between steps, which lets DDP skip the
    unused-parameter search and overlap communication better."""
    ddp_gradient_as_bucket_view: bool = False
    """DDP: make gradients views into the all-reduce buckets, saving one gradient copy of memory."""
    ddp_bucket_cap_mb: int | None = attrs.field(default=None, validator=positive)
    """DDP: size of the gradient all-reduce buckets in MiB (None = DDP's default of 25); larger buckets mean
    fewer, bigger messages."""
    ddp_bucket_cap_mb_list: list[int] | None = None
    """DDP: the cap of each bucket in MiB, in bucket order (DDP bucket_cap_mb_list); the last cap repeats for
    further buckets."""
    ddp_broadcast_buffers: bool = True
    """DDP: broadcast rank 0's buffers (e.g. BatchNorm statistics) to every rank before each forward."""
    ddp_init_sync: bool = True
    """DDP: broadcast rank 0's parameters and buffers when the model is wrapped, so every rank starts equal."""
    ddp_skip_all_reduce_unused_params: bool = False
    """DDP: with --ddp-find-unused-parameters, skip the all-reduce of parameters unused on every rank."""
    ddp_batched_grad_copy: bool = False
    """DDP: copy gradients into the buckets in one batched operation instead of one copy per parameter."""
    ddp_comm_hook: Literal["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"] | None = None
    """DDP communication hook: allreduce_hook (DDP's own all-reduce as a hook), fp16_compress_hook or
    bf16_compress_hook (gradients travel in half precision and are cast back; half the traffic)."""
    ddp_comm_hook_logging: bool = False
    """Log on rank 0 what --ddp-comm-hook does: the hook at registration, then each bucket (index, elements,
    dtype on the wire) the first time it is reduced."""
    dynamo_optimize_ddp: bool = True
    """torch._dynamo.config.optimize_ddp while the run lasts (DDP): when compiled code runs under DDP, split
    graphs at bucket boundaries so communication overlaps compute."""
    zero_parameters_as_bucket_view: bool = False
    """ZeRO-1: pack parameters into contiguous buckets for the parameter broadcast after each step (fewer
    collectives, one extra copy of the parameters)."""
    zero_master_param_dtype: Literal["none", "fp32"] = "none"
    """ZeRO-1 master weights. none: parameters stay fp32 and --dtype is only the autocast compute dtype.
    fp32: parameters and gradients (and DDP's all-reduce) are stored in --dtype (bfloat16/float16) and
    each rank keeps fp32 master copies of the parameters its optimizer shard updates."""
    fsdp_reshard_default: ReshardPolicy = attrs.field(default=None, validator=_reshard)
    """Reshard after forward for FSDP units: true, false, none, or an int > 1 dividing the shard size."""
    fsdp_reshard_root: ReshardPolicy = attrs.field(default=False, validator=_reshard)
    """Reshard after forward for the root FSDP group."""
    fsdp_reshard_module_overrides: str | None = None
    """Per-class reshard after forward, 'Class=value,...' with value true, false, none or an int > 1; overrides
    --fsdp-reshard-default for the FSDP units of those classes (a class that is no unit is an error)."""
    fsdp_forward_prefetch_distance: int = attrs.field(default=0, validator=non_negative)
    """FSDP: each unit explicitly prefetches (all-gathers) the next N units in forward order; 0 leaves it to
    FSDP's implicit prefetching."""
    fsdp_backward_prefetch_distance: int = attrs.field(default=0, validator=non_negative)
    """FSDP: each unit explicitly prefetches the next N units in backward (reverse) order; 0 leaves it to
    FSDP's implicit prefetching."""
    fsdp_wrap_modules: str | None = None
    """Comma-separated class names made FSDP units."""
    fsdp_no_wrap_modules: str | None = None
    """Comma-separated class names never made FSDP units."""
    fsdp_min_num_params: int = attrs.field(default=1_000_000, validator=non_negative)
    """FSDP auto-wrap: a module class that repeats (e.g. transformer blocks) becomes an FSDP unit when one
    instance has at least this many parameters."""
    fsdp_leftover_min_num_params: int = attrs.field(default=1_000_000, validator=non_negative)
    """FSDP auto-wrap: a module outside the repeated units becomes its own unit when it has at least this many
    parameters (smaller ones stay in the root group)."""
    fsdp_original_param_dtype: Literal["fp32", "bf16", "fp16"] | None = None
    """Sharded parameter dtype (what the optimizer updates). None keeps fp32: with --dtype bfloat16,
    FSDP keeps fp32 master parameters by default and computes in bf16."""
    fsdp_unsharded_param_dtype: Literal["fp32", "bf16", "fp16"] | None = None
    """Compute dtype after all-gather; None follows --dtype (bfloat16 -> bf16, float32 -> fp32)."""
    fsdp_reduce_dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    """FSDP: dtype gradients are reduce-scattered in; fp32 is exact, bf16/fp16 halve the traffic at some
    precision cost."""
    fsdp_cast_forward_inputs: bool = True
    """Cast forward inputs to the parameter dtype."""
    fsdp_reduce_every_microbatch: bool = True
    """FSDP with gradient accumulation: reduce-scatter gradients after every micro-batch (default) and keep
    only sharded gradients, or (--no-fsdp-reduce-every-microbatch) only after the last one, which sends
    1/GA of the reduce-scatter traffic but keeps unsharded gradients of the whole model between
    micro-batches (about 4 bytes x parameters more memory in fp32). Under HSDP the all-reduce across
    replicas runs only on the last micro-batch either way."""

    # --- Stability and runtime ---
    loss_spike_threshold: float = 100.0
    """A loss above this, or NaN/Inf, contributes zero to the update (counted and logged)."""
    check_for_nan_in_loss_and_grad: bool = True
    """Check loss and gradients for NaN/Inf and skip the update when found."""
    deterministic_mode: bool = False
    """Use only deterministic torch/cuDNN kernels (and a fixed cuBLAS workspace) so reruns match bit for bit;
    slower, and ops without a deterministic kernel raise."""
    disable_tf32: bool = False
    """Disable TF32 matmuls and convolutions on CUDA (on by default: faster on Ampere+, about 3 decimal digits
    of precision); disable it when float32 accuracy matters."""
    manual_gc: bool = False
    """Disable automatic garbage collection and collect explicitly."""
    manual_gc_interval: int = attrs.field(default=0, validator=non_negative)
    """Collect garbage every N steps when --manual-gc (0: only at start and end)."""

    # --- Plugins ---
    block_plugins: list[str] = attrs.field(factory=list)
    """Names of hook plugins (group embodied.hooks) and loggers (group embodied.loggers) not to load, like
    pytest's -p no:NAME; use it to skip a plugin that is installed but broken or unwanted."""
    loggers: list[str] | None = None
    """Loggers to run (plugin group embodied.loggers), e.g. `--loggers console jsonl`; None runs every installed
    one. Each still stays off unless its flags enable it (wandb needs --wandb-mode, tensorboard
    --tensorboard-dir)."""
