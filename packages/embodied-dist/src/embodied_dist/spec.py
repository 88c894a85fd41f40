"""Entry-point specs of embodied-dist (light: importing this module imports no torch)."""

from __future__ import annotations

from embodied_core.registry.specs import PluginSpec

DDP = PluginSpec(name="ddp", description="DistributedDataParallel; ZeRO-1 optimizer sharding with --zero-optimizer",
                 factory="embodied_dist.ddp:build_ddp")
FSDP = PluginSpec(name="fsdp", description="FSDP2 fully_shard; HSDP (replicate x shard) with --hsdp-shard-size",
                  factory="embodied_dist.fsdp:build_fsdp")
CHECKPOINT = PluginSpec(name="checkpoint", description="checkpoint tools: convert a DCP checkpoint to one file, "
                        "export an inference-only policy folder",
                        factory="embodied_dist.convert:main")
