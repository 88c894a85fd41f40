"""Activation checkpointing figures: peak activation memory and step time of pi05 and lingbot_va at a mid size, with
and without ``--activation-checkpoint-module-patterns`` (the joint layers / transformer blocks).

Activation memory is measured as the bytes autograd keeps for backward when the forward ends (every distinct
storage a saved-tensor hook sees; inside a checkpointed module torch's checkpoint keeps nothing but its inputs),
plus, on CUDA, the peak allocated memory of the step. Gradients are checked equal (float32) between the two runs.

Usage: python benchmarks/activation_checkpointing.py [--steps 3] [--batch-size 4] [--models pi05 lingbot_va]
Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from embodied_core.config.resolve import load_config
from embodied_core.trainer.activation_checkpoint import apply_activation_checkpointing

PI05_MID = {"vlm_width": 512, "vlm_mlp_dim": 2048, "expert_width": 256, "expert_mlp_dim": 1024, "depth": 6,
            "num_heads": 8, "num_kv_heads": 1, "head_dim": 64, "vision_width": 256, "vision_depth": 4,
            "vision_mlp_dim": 1024, "vision_num_heads": 4}
LINGBOT_MID = {"num_layers": 8, "num_attention_heads": 8, "attention_head_dim": 72, "ffn_dim": 2304,
               "text_dim": 64, "freq_dim": 64}
PATTERNS = {"pi05": "layers.*", "lingbot_va": "transformer.blocks.*"}


def _pi05(batch_size: int) -> tuple[nn.Module, Callable[[], Any]]:
    from embodied_data.formats.dummy import DummyDataset
    from embodied_models.pi05.modeling import build_model
    from embodied_models.pi05.transforms import make_transforms

    config = load_config("pi05_tiny", training={"dataset_format": "dummy_datasets"}, model=PI05_MID,
                         data={"image_size": [112, 112]})
    model = build_model(config.model, config.data)
    dataset = DummyDataset(config.data, num_samples=batch_size)
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    batch = transforms.collate_fn([transforms.sample_transform(dataset[i]) for i in range(batch_size)])
    return model, lambda: model(batch).loss


def _lingbot_va(batch_size: int) -> tuple[nn.Module, Callable[[], Any]]:
    from embodied_models.lingbot_va.modeling import build_model

    config = load_config(training={"model_name": "lingbot_va_tiny"}, model=LINGBOT_MID,
                         data={"image_size": [128, 128], "num_latent_frames": 5})
    model = build_model(config.model, config.data)
    cfg, data = model.config, model.data_config
    h, w = data.latent_hw()
    mask = torch.zeros(batch_size, cfg.action_dim, data.num_latent_frames, data.action_per_frame, 1, dtype=torch.bool)
    mask[:, cfg.used_action_channel_ids] = True
    batch = {"latents": torch.randn(batch_size, cfg.in_channels, data.num_latent_frames, h, w),
             "actions": torch.randn(mask.shape) * mask, "actions_mask": mask,
             "text_emb": torch.randn(batch_size, cfg.text_len, cfg.text_dim)}

    def loss() -> torch.Tensor:
        model.seed_rng(0)
        return model(batch).loss

    return model, loss


def _saved_bytes(loss_fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, int]:
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn()
    return loss, sum(storages.values())


def _measure(name: str, *, checkpointing: bool, steps: int, batch_size: int) -> dict[str, Any]:
    torch.manual_seed(0)
    model, loss_fn = {"pi05": _pi05, "lingbot_va": _lingbot_va}[name](batch_size)
    model.train()
    if checkpointing:
        apply_activation_checkpointing(model, patterns=PATTERNS[name], skip=None)
    params = sum(p.numel() for p in model.parameters())
    times, saved, peak = [], 0, None
    for step in range(steps + 1):
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        torch.manual_seed(1)
        loss, saved = _saved_bytes(loss_fn)
        loss.backward()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
        if step:  # the first step warms up
            times.append(time.perf_counter() - start)
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
    return {"params": params, "saved": saved, "time": statistics.median(times), "peak": peak, "grads": grads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--models", nargs="+", default=["pi05", "lingbot_va"], choices=sorted(PATTERNS))
    args = parser.parse_args()
    print(f"{torch.get_num_threads()} threads, {'CUDA' if torch.cuda.is_available() else 'CPU'}, float32, "
          f"batch {args.batch_size}, median of {args.steps} forward+backward steps")
    for name in args.models:
        off = _measure(name, checkpointing=False, steps=args.steps, batch_size=args.batch_size)
        on = _measure(name, checkpointing=True, steps=args.steps, batch_size=args.batch_size)
        same = all(torch.allclose(on["grads"][k], g, atol=1e-6, rtol=1e-5) for k, g in off["grads"].items())
        print(f"{name} ({off['params'] / 1e6:.1f}M parameters), checkpointing {PATTERNS[name]}:")
        for label, run in (("without", off), ("with", on)):
            peak = f", CUDA peak {run['peak'] / 2**20:.0f} MiB" if run["peak"] is not None else ""
            print(f"  {label:7s}: activations kept for backward {run['saved'] / 2**20:8.1f} MiB, "
                  f"step {run['time'] * 1e3:8.1f} ms{peak}")
        print(f"  activation memory x{on['saved'] / off['saved']:.2f}, step time x{on['time'] / off['time']:.2f}, "
              f"float32 gradients equal: {same}")


if __name__ == "__main__":
    main()
