"""Specs of the plugins embodied-core provides (named by its entry points; imports no torch)."""

from __future__ import annotations

from embodied_core.registry.specs import PluginSpec

FINETUNE_TRAINER = PluginSpec(name="FinetuneTrainer", description="Supervised fine-tuning loop (default)",
                              factory="embodied_core.trainer.base:build_finetune_trainer")

ADAMW = PluginSpec(name="AdamW", description="torch.optim.AdamW (decoupled weight decay)",
                   factory="embodied_core.optim.optimizers:build_adamw")
ADAM = PluginSpec(name="Adam", description="torch.optim.Adam (L2 weight decay)",
                  factory="embodied_core.optim.optimizers:build_adam")
SGD = PluginSpec(name="SGD", description="torch.optim.SGD with momentum",
                 factory="embodied_core.optim.optimizers:build_sgd")
TORCH_FUSED_ADAMW = PluginSpec(name="TorchFusedAdamW",
                               description="torch.optim.AdamW(fused=True) (CUDA; CPU in recent torch)",
                               factory="embodied_core.optim.optimizers:build_torch_fused_adamw")
TE_FUSED_ADAMW = PluginSpec(name="TEFusedAdamW", description="Transformer Engine FusedAdam in AdamW mode (CUDA)",
                            factory="embodied_core.optim.optimizers:build_te_fused_adamw",
                            requires=("transformer_engine",),
                            install_hint="pip install transformer_engine[pytorch]")
APEX_FUSED_ADAMW = PluginSpec(name="ApexFusedAdamW", description="NVIDIA Apex FusedAdam in AdamW mode (CUDA)",
                              factory="embodied_core.optim.optimizers:build_apex_fused_adamw", requires=("apex",),
                              install_hint="build NVIDIA apex with --cuda_ext, see github.com/NVIDIA/apex")

def _schedule(name: str, description: str) -> PluginSpec:
    return PluginSpec(name=name, description=description, factory=f"embodied_core.optim.schedules:build_{name}")


LINEAR = _schedule("linear", "warmup, then linear decay to 0")
COSINE = _schedule("cosine", "warmup, then half a cosine to 0")
COSINE_WITH_RESTARTS = _schedule("cosine_with_restarts", "warmup, then --lr-num-cycles hard-restart cosines to 0")
POLYNOMIAL = _schedule("polynomial", "warmup, then (1-p)^--lr-decay-power decay to --lr-end")
CONSTANT = _schedule("constant", "constant LR, no warmup")
CONSTANT_WITH_WARMUP = _schedule("constant_with_warmup", "warmup, then constant")
INVERSE_SQRT = _schedule("inverse_sqrt", "warmup, then 1/sqrt(step) decay, held after --lr-decay-iters")
COSINE_WITH_MIN_LR = _schedule("cosine_with_min_lr", "warmup from 0, then cosine decay to --min-lr")
COSINE_WARMUP_WITH_MIN_LR = _schedule("cosine_warmup_with_min_lr", "warmup from --min-lr, then cosine to --min-lr")
LAMBDA_LINEAR = _schedule("lambda_linear", "repeating --lambda-cycle-length cycles: warmup --lambda-f-start to "
                          "--lambda-f-max, linear decay to --lambda-f-min")


SINGLE = PluginSpec(name="single", description="one process, no wrapping",
                    factory="embodied_core.distributed.base:build_single")

CYCLIC = PluginSpec(name="cyclic", description="rank r takes every world_size-th index",
                    factory="embodied_core.data.samplers:cyclic_sampler")
BLOCK = PluginSpec(name="block", description="rank r takes the r-th contiguous block",
                   factory="embodied_core.data.samplers:block_sampler")

CONSOLE = PluginSpec(name="console", description="one line per --log-interval on rank 0",
                     factory="embodied_core.loggers.console:build_console")
JSONL = PluginSpec(name="jsonl", description="<output-dir>/metrics.jsonl",
                   factory="embodied_core.loggers.jsonl:build_jsonl")
WANDB = PluginSpec(name="wandb", description="Weights & Biases (--wandb-mode online|offline, --wandb-project)",
                   factory="embodied_core.loggers.wandb_logger:build_wandb")
TENSORBOARD = PluginSpec(name="tensorboard", description="TensorBoard event files in --tensorboard-dir",
                         factory="embodied_core.loggers.tensorboard_logger:build_tensorboard")
PROGRESS = PluginSpec(name="progress", description="rich progress bar with ETA on rank 0 (interactive terminals)",
                      factory="embodied_core.loggers.progress:build_progress")
