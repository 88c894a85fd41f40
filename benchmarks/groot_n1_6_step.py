"""Training step time of ``groot_n1_6_tiny`` and the parameter counts of groot_n1_6 / groot_n1_6_tiny.

Setting: the ``groot_n1_6_tiny`` preset (default YAML: 2 SigLIP2 layers with tile windows and 2-D RoPE, 2 Qwen3
layers, 4 DiT blocks, two 32 x 32 views), a fixed batch built by its own transforms from ``dummy_datasets`` samples
(so data loading is not timed), forward + backward + AdamW step on the trainable parameters (the head and the top
language layer by default), float32 (or --dtype bfloat16 autocast), one process on CPU unless --device says
otherwise. Prints the median of ``--steps`` timed steps after ``--warmup`` untimed ones, and the counts (the full
size built on the meta device).

    .venv/bin/python benchmarks/groot_n1_6_step.py [--batch-size 4] [--steps 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from embodied_core.config.resolve import load_config
from embodied_data.formats.dummy import DummyDataset
from embodied_models.groot_n1_6.modeling import build_model
from embodied_models.groot_n1_6.transforms import make_transforms

DATA = {"state_dim": 7, "action_dim": 4, "camera_keys": ["observation.images.front", "observation.images.wrist"]}


def _config(name: str):
    return load_config(name, training={"dataset_format": "dummy_datasets", "tokenizer_path": "unused"}, data=DATA)


def parameter_counts() -> dict[str, int]:
    """Parameters of the official-size model (built on the meta device) and of the tiny preset."""
    full_cfg, tiny_cfg = _config("groot_n1_6"), _config("groot_n1_6_tiny")
    with torch.device("meta"):
        full = build_model(full_cfg.model, full_cfg.data)
    tiny = build_model(tiny_cfg.model, tiny_cfg.data)
    return {"groot_n1_6": sum(p.numel() for p in full.parameters()),
            "groot_n1_6_tiny": sum(p.numel() for p in tiny.parameters()),
            "groot_n1_6_tiny trainable": sum(p.numel() for p in tiny.parameters() if p.requires_grad)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = _config("groot_n1_6_tiny")
    dataset = DummyDataset(config.data, num_samples=args.batch_size)
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    batch = transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(args.batch_size)])
    batch = batch.to(args.device)
    torch.manual_seed(0)
    model = build_model(config.model, config.data).to(args.device).train()
    model.seed_rng(0)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    autocast = (torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16) if args.dtype == "bfloat16"
                else contextlib.nullcontext())
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        with autocast:
            loss = model(batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    print(f"groot_n1_6_tiny, batch {args.batch_size}, {args.dtype}, {args.device}, {torch.get_num_threads()} "
          f"thread(s): median step {statistics.median(times) * 1000:.1f} ms (min {min(times) * 1000:.1f}, "
          f"max {max(times) * 1000:.1f}) over {args.steps} steps; last loss {loss.item():.4f}")
    for name, count in parameter_counts().items():
        print(f"{name:28s} {count:,}")


if __name__ == "__main__":
    main()
