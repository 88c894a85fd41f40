"""Trainable parameters, optimizer-state bytes, gradient bytes, peak memory and step time of pi05 at a mid size,
fine-tuned in full and with LoRA (``--use-lora``'s injection: PEFT adapters on pi05's default_lora_targets()).

Setting: pi05 with both towers, SigLIP and the flow-matching head at about 200 M parameters (widths below; the
official model is 3.3 B), the built-in tiny tokenizer, a fixed batch built by pi05's own transforms from
``dummy_datasets`` samples, AdamW, ``--steps`` optimizer steps. Each configuration runs in its own process so
that peak RSS (``ru_maxrss``, CPU) or ``torch.cuda.max_memory_allocated`` (CUDA) is its own. Figures, not asserts.

    .venv/bin/python benchmarks/lora_memory.py [--steps 3] [--batch-size 2] [--lora-r 16] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

MID = {"vlm_width": 1024, "vlm_mlp_dim": 4096, "vocab_size": 16384, "expert_width": 512, "expert_mlp_dim": 2048,
       "depth": 8, "num_heads": 8, "num_kv_heads": 1, "head_dim": 128, "vision_width": 384, "vision_depth": 6,
       "vision_mlp_dim": 1536, "vision_num_heads": 6, "tokenizer": "tiny", "max_token_len": 64}
DATA = {"image_size": [112, 112], "action_horizon": 16}


def _peak_mib(device: str) -> float:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _tensor_bytes(tensors: Any) -> int:
    import torch

    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def run_one(mode: str, *, steps: int, batch_size: int, lora_r: int, device: str) -> dict[str, Any]:
    """One configuration (``full`` or ``lora``) in this process; returns its figures."""
    import torch

    from embodied_core.config.resolve import load_config
    from embodied_core.config.training_args import TrainingArgs
    from embodied_core.lora.inject import apply_lora
    from embodied_core.lora.options import LoraSettings
    from embodied_data.formats.dummy import DummyDataset
    from embodied_models.pi05.modeling import build_model
    from embodied_models.pi05.transforms import make_transforms

    config = load_config("pi05", training={"dataset_format": "dummy_datasets"}, model=MID, data=DATA)
    torch.manual_seed(0)
    model = build_model(config.model, config.data)
    if mode == "lora":
        settings = LoraSettings.from_args(TrainingArgs(use_lora=True, lora_r=lora_r, lora_alpha=2 * lora_r))
        apply_lora(model, settings)
    model = model.to(device).train()
    after_build = _peak_mib(device)
    dataset = DummyDataset(config.data, num_samples=max(batch_size, 4))
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    batch = transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(batch_size)]).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        model(batch).loss.backward()
        optimizer.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    state_bytes = sum(_tensor_bytes(s.values()) for s in optimizer.state.values())
    return {"mode": mode, "total_params": sum(p.numel() for p in model.parameters()),
            "trainable_params": sum(p.numel() for p in params), "optimizer_state_mib": state_bytes / 2**20,
            "gradient_mib": _tensor_bytes(p.grad for p in params) / 2**20, "after_build_mib": after_build,
            "peak_mib": _peak_mib(device), "step_s": statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--one", choices=["full", "lora"], help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    options = {"steps": args.steps, "batch_size": args.batch_size, "lora_r": args.lora_r, "device": args.device}
    if args.one:
        print(json.dumps(run_one(args.one, **options)))
        return
    rows = []
    for mode in ("full", "lora"):
        child = [sys.executable, __file__, "--one", mode, "--steps", str(args.steps), "--batch-size",
                 str(args.batch_size), "--lora-r", str(args.lora_r), "--device", args.device]
        done = subprocess.run(child, capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"pi05 mid size ({rows[0]['total_params'] / 1e6:.1f} M parameters), batch {args.batch_size}, "
          f"AdamW, {args.device}, LoRA r={args.lora_r} on default_lora_targets()")
    print(f"{'':6} {'trainable':>12} {'optim state':>12} {'grads':>10} {'after build':>12} {'peak':>10} "
          f"{'step':>8}")
    for r in rows:
        print(f"{r['mode']:6} {r['trainable_params']:>12,} {r['optimizer_state_mib']:>9.1f} MiB "
              f"{r['gradient_mib']:>6.1f} MiB {r['after_build_mib']:>8.0f} MiB {r['peak_mib']:>6.0f} MiB "
              f"{r['step_s']:>7.2f}s")
    full, lora = rows
    print(f"LoRA: {lora['trainable_params'] / full['trainable_params']:.2%} of the parameters train; optimizer "
          f"state {full['optimizer_state_mib'] / max(lora['optimizer_state_mib'], 1e-9):.0f}x smaller; peak "
          f"{full['peak_mib'] - lora['peak_mib']:.0f} MiB lower")


if __name__ == "__main__":
    main()
