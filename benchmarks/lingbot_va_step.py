"""LingBot-VA figures: parameter counts (full size on the meta device, tiny) and the tiny step time on CPU.

Usage: python benchmarks/lingbot_va_step.py [--steps 20] [--batch-size 2] [--preset lingbot_va_tiny]
Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from embodied_core.config.resolve import load_config
from embodied_models.lingbot_va.checkpoint import num_parameters
from embodied_models.lingbot_va.modeling import LingBotVAModel


def _batch(model: LingBotVAModel, batch_size: int) -> dict[str, torch.Tensor]:
    cfg, data = model.config, model.data_config
    h, w = data.latent_hw()
    frames, n = data.num_latent_frames, data.action_per_frame
    mask = torch.zeros(batch_size, cfg.action_dim, frames, n, 1, dtype=torch.bool)
    mask[:, cfg.used_action_channel_ids] = True
    return {"latents": torch.randn(batch_size, cfg.in_channels, frames, h, w),
            "actions": torch.randn(batch_size, cfg.action_dim, frames, n, 1) * mask, "actions_mask": mask,
            "text_emb": torch.randn(batch_size, cfg.text_len, cfg.text_dim)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--preset", default="lingbot_va_tiny")
    args = parser.parse_args()
    for name in ("lingbot_va_libero", "lingbot_va_robotwin"):
        config = load_config(training={"model_name": name})
        with torch.device("meta"):
            model = LingBotVAModel(config.model, config.data)
        print(f"{name}: {num_parameters(model):,} parameters (meta device)")
    config = load_config(training={"model_name": args.preset})
    torch.manual_seed(0)
    model = LingBotVAModel(config.model, config.data)
    print(f"{args.preset}: {num_parameters(model):,} parameters")
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    batch = _batch(model, args.batch_size)
    times = []
    for step in range(args.steps + 3):
        start = time.perf_counter()
        loss = model(batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= 3:  # warm-up steps excluded
            times.append(time.perf_counter() - start)
    print(f"{args.preset}: forward+backward+AdamW step {statistics.median(times) * 1e3:.1f} ms median over "
          f"{args.steps} steps (batch {args.batch_size}, {torch.get_num_threads()} threads, CPU)")


if __name__ == "__main__":
    main()
