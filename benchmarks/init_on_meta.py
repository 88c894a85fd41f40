"""--init-on-meta figures (CPU, gloo, 2 processes): peak host RSS per rank with and without it for lingbot_va at about
0.5B parameters, loading the same sharded ``transformer/`` folder through the trainer's own model path
(``prepare_model`` + ``distribute_model``: build, FSDP2 sharding, pretrained weights); plus the bit-equality of the
loaded weights (a hash of every rank's local shards) and of the first loss.

Usage: python benchmarks/init_on_meta.py [--layers 10] [--workdir /tmp/init_on_meta]
The weights folder (~2 GB at the default size) is written once under --workdir. Prints figures only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

MODEL = {"num_attention_heads": 12, "attention_head_dim": 128, "ffn_dim": 8960, "in_channels": 16,
         "out_channels": 16, "text_dim": 4096, "text_len": 32, "freq_dim": 256, "attention_backend": "sdpa"}
DATA = {"image_size": [64, 64], "num_latent_frames": 3}


def _config(layers: int) -> Any:
    from embodied_core.config.resolve import load_config

    return load_config(training={"model_name": "lingbot_va_tiny"}, model={**MODEL, "num_layers": layers}, data=DATA)


def write_weights(folder: Path, layers: int) -> int:
    """A random transformer folder with this size's keys, written shard by shard (never a whole model in memory)."""
    from safetensors.torch import save_file

    from embodied_models.lingbot_va.checkpoint import CONFIG_NAME, INDEX_NAME
    from embodied_models.lingbot_va.modeling import transformer_from_config

    config = _config(layers)
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in transformer_from_config(config.model).state_dict().items()}
    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    shards, shard, size, weight_map = [], {}, 0, {}
    for key in sorted(shapes):
        shard[key] = torch.randn(shapes[key], generator=generator) * 0.02
        size += shard[key].numel() * 4
        if size > 500 * 2**20:
            shards.append(shard)
            shard, size = {}, 0
    shards.append(shard)
    for i, part in enumerate(shards, 1):
        name = f"diffusion_pytorch_model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(part, str(folder / name))
        weight_map.update(dict.fromkeys(part, name))
        part.clear()
    (folder / INDEX_NAME).write_text(json.dumps({"weight_map": weight_map}))
    (folder / CONFIG_NAME).write_text(json.dumps({"_class_name": "LingBotVATransformer"}))
    return sum(s.numel() for s in shapes.values())


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def worker(folder: str, layers: int, meta: bool, out: str) -> None:
    """One rank: the trainer's model path under FSDP, then the first loss on a fixed batch."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from embodied_core.trainer import components
    from embodied_core.trainer.api import Trainer

    training = {"model_name": "lingbot_va_tiny", "dataset_format": "dummy_datasets", "trainer_type": "lingbot_va",
                "distributed_strategy": "fsdp", "dtype": "float32", "init_on_meta": meta,
                "pretrained_checkpoint": folder, "output_dir": str(Path(out).parent / "run"),
                "dataset_strategy": "default", "lerobotdataset_version": "v3.0"}  # the tiny YAML's, for LeRobot caches
    trainer = Trainer({"training": training, "model": {**MODEL, "num_layers": layers}, "data": DATA}).build()
    trainer.strategy = components.build_strategy(trainer.args, int(os.environ["WORLD_SIZE"]))
    trainer.strategy.setup()
    trainer.device = trainer.strategy.device
    rss_start = _rss_mib()
    model = trainer.distribute_model(trainer.prepare_model(resuming=False), resuming=False)
    rss_loaded = _rss_mib()
    digest = hashlib.sha256()
    for name, param in sorted(model.named_parameters()):
        local = param.to_local() if isinstance(param, DTensor) else param
        digest.update(name.encode() + local.detach().contiguous().numpy().tobytes())
    inner = trainer.strategy.unwrap_model(model)
    cfg, data = inner.config, inner.data_config
    gen = torch.Generator().manual_seed(1)
    h, w = data.latent_hw()
    mask = torch.zeros(1, cfg.action_dim, data.num_latent_frames, data.action_per_frame, 1, dtype=torch.bool)
    mask[:, cfg.used_action_channel_ids] = True
    batch = {"latents": torch.randn(1, cfg.in_channels, data.num_latent_frames, h, w, generator=gen),
             "actions": torch.randn(mask.shape, generator=gen) * mask, "actions_mask": mask,
             "text_emb": torch.randn(1, cfg.text_len, cfg.text_dim, generator=gen)}
    inner.seed_rng(0)
    loss = model(batch).loss
    loss.backward()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    record = {"rss_start": rss_start, "rss_loaded": rss_loaded, "rss_step": _rss_mib(),
              "digest": digest.hexdigest(), "loss": float(mean) / dist.get_world_size()}
    Path(out).with_suffix(f".rank{dist.get_rank()}.json").write_text(json.dumps(record))
    trainer.strategy.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/init_on_meta"))
    parser.add_argument("--worker", nargs=4, metavar=("FOLDER", "LAYERS", "META", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        folder, layers, meta, out = args.worker
        worker(folder, int(layers), meta == "1", out)
        return
    folder = args.workdir / f"transformer_{args.layers}"
    if not (folder / "config.json").is_file():
        count = write_weights(folder, args.layers)
        print(f"wrote {folder} ({count / 1e9:.2f}B parameters)")
    results = {}
    for meta in (False, True):
        out = args.workdir / f"result_{int(meta)}"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", __file__, "--worker",
                        str(folder), str(args.layers), str(int(meta)), str(out)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        results[meta] = [json.loads(out.with_suffix(f".rank{r}.json").read_text()) for r in (0, 1)]
    with torch.device("meta"):
        from embodied_models.lingbot_va.modeling import LingBotVAModel

        config = _config(args.layers)
        params = sum(p.numel() for p in LingBotVAModel(config.model, config.data).parameters())
    print(f"lingbot_va, {params / 1e9:.2f}B parameters ({params * 4 / 2**30:.2f} GiB in fp32), FSDP2 on 2 gloo "
          "processes, weights from a sharded transformer/ folder")
    for meta, ranks in results.items():
        label = "with --init-on-meta   " if meta else "without --init-on-meta"
        for rank, r in enumerate(ranks):
            print(f"  {label} rank {rank}: peak RSS {r['rss_loaded']:7.0f} MiB after loading "
                  f"({r['rss_start']:.0f} MiB before building), {r['rss_step']:7.0f} MiB after the first "
                  f"forward/backward; first loss {r['loss']:.6f}")
    same = all(a["digest"] == b["digest"] for a, b in zip(results[False], results[True], strict=True))
    print(f"  local shards bit-identical on every rank: {same}; first losses bit-identical: "
          f"{results[False][0]['loss'] == results[True][0]['loss']}")


if __name__ == "__main__":
    main()
