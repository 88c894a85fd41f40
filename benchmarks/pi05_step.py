"""Forward+backward step time and peak RSS of ``pi05_tiny`` (and parameter counts of pi05 / pi05_tiny).

Setting: the ``pi05_tiny`` preset (default YAML), a fixed prepared batch built by its own transforms from
``dummy_datasets`` samples (so data loading is not timed), AdamW step included, float32 (or --dtype bfloat16
autocast), single process on CPU unless --device says otherwise. Prints the median of ``--steps`` timed
steps after ``--warmup`` untimed ones, and the process's peak RSS (``ru_maxrss``).

    .venv/bin/python benchmarks/pi05_step.py [--batch-size 8] [--steps 20] [--dtype float32] [--threads N]
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import time

import torch

from embodied_core.config.resolve import load_config
from embodied_data.formats.dummy import DummyDataset
from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig
from embodied_models.pi05.modeling import build_model
from embodied_models.pi05.transforms import make_transforms


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def parameter_counts() -> dict[str, int]:
    """Parameters of the official-size model (built on the meta device) and of the tiny preset."""
    with torch.device("meta"):
        full = build_model(Pi05ModelConfig(), Pi05DataConfig())
    tiny_cfg = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"})
    tiny = build_model(tiny_cfg.model, tiny_cfg.data)
    return {"pi05": sum(p.numel() for p in full.parameters()),
            "pi05_tiny": sum(p.numel() for p in tiny.parameters())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    counts = parameter_counts()
    config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"})
    torch.manual_seed(0)
    model = build_model(config.model, config.data).to(args.device).train()
    dataset = DummyDataset(config.data, num_samples=max(args.batch_size, 16))
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    batch = transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(args.batch_size)])
    batch = batch.to(args.device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    autocast = (torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16) if args.dtype == "bfloat16"
                else contextlib.nullcontext())

    times = []
    for step in range(args.warmup + args.steps):
        started = time.perf_counter()
        with autocast:
            loss = model(batch).loss
        loss.float().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if args.device != "cpu":
            torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - started)

    seq = config.data.num_image_slots * (config.data.image_size[0] // config.model.vision_patch_size) ** 2 \
        + config.model.max_token_len + config.data.action_horizon
    print(f"parameters: pi05 {counts['pi05']:,} | pi05_tiny {counts['pi05_tiny']:,}")
    print(f"pi05_tiny fwd+bwd+AdamW, batch {args.batch_size}, {args.dtype}, {args.device}, "
          f"{torch.get_num_threads()} threads, sequence {seq} tokens")
    print(f"step time: median {statistics.median(times) * 1e3:.1f} ms, min {min(times) * 1e3:.1f} ms "
          f"over {len(times)} steps (last loss {loss.item():.4f})")
    print(f"peak RSS: {_peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
