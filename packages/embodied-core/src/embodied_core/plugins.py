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

COSINE_WITH_MIN_LR = PluginSpec(name="cosine_with_min_lr", description="warmup, then cosine decay to --min-lr",
                                factory="embodied_core.optim.schedules:build_cosine_with_min_lr")

SINGLE = PluginSpec(name="single", description="one process, no wrapping",
                    factory="embodied_core.strategies.base:build_single")

CYCLIC = PluginSpec(name="cyclic", description="rank r takes every world_size-th index",
                    factory="embodied_core.data.samplers:cyclic_sampler")
BLOCK = PluginSpec(name="block", description="rank r takes the r-th contiguous block",
                   factory="embodied_core.data.samplers:block_sampler")

CONSOLE = PluginSpec(name="console", description="one line per --log-interval on rank 0",
                     factory="embodied_core.loggers.console:build_console")
JSONL = PluginSpec(name="jsonl", description="<output-dir>/metrics.jsonl",
                   factory="embodied_core.loggers.jsonl:build_jsonl")
