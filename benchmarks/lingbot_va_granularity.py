"""LingBot-VA on one device: FSDP2 unit granularity (one unit per block vs one per Linear) and attention backends.

Shards a mid-size LingBot-VA (``--width``/``--layers``, LIBERO token layout) with ``fully_shard`` on a 1-rank
mesh (bf16 compute, fp32 reduce, reshard after forward off, as ``examples/lingbot_va/train.sh``), once with one
unit per ``LingBotBlock`` and once with one unit per ``nn.Linear``, and prints the median step time of each. (The
trainer itself does not wrap a 1-process run, so this is measured directly.) On CUDA it first checks the
flex-attention path against the dense-mask SDPA path on the golden fixture.

Usage: python benchmarks/lingbot_va_granularity.py [--width 1536] [--layers 12] [--frames 8] [--steps 10]
Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def flex_vs_dense() -> None:
    """Max |diff| between the flex (CUDA) and SDPA-dense training forwards on the golden fixture, in bf16."""
    from safetensors.torch import load_file

    from embodied_models.lingbot_va.transformer import LingBotVATransformer

    fixture = REPO.parent / "shared" / "fixtures" / "lingbot_va_lerobot"
    inputs = {k: v.cuda() for k, v in load_file(str(fixture / "inputs.safetensors")).items()}
    outs = {}
    for backend in ("sdpa", "flex"):
        net = LingBotVATransformer(num_attention_heads=2, attention_head_dim=14, in_channels=8, out_channels=8,
                                   action_dim=8, text_dim=16, freq_dim=16, ffn_dim=56, num_layers=2,
                                   attention_backend=backend)
        net.load_state_dict(load_file(str(fixture / "model.safetensors")))
        torch.nn.Module.to(net, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            outs[backend] = net.forward_train(
                noisy_video=inputs["train.video.noisy_latents"], clean_video=inputs["train.video.cond_latents"],
                noisy_action=inputs["train.action.noisy"], clean_action=inputs["train.action.cond"],
                video_timesteps=inputs["train.video.timesteps"],
                clean_video_timesteps=inputs["train.video.cond_timesteps"],
                action_timesteps=inputs["train.action.timesteps"],
                clean_action_timesteps=inputs["train.action.cond_timesteps"],
                video_grid_ids=inputs["train.video.grid_id"], action_grid_ids=inputs["train.action.grid_id"],
                text=inputs["text_emb"], chunk_size=1, window_size=6)
    for i, name in enumerate(("video", "action")):
        diff = (outs["flex"][i].float() - outs["sdpa"][i].float()).abs().max().item()
        print(f"flex vs dense SDPA ({name}, bf16, CUDA): max |diff| {diff:.3g}")


def _model(args: argparse.Namespace, device: torch.device) -> torch.nn.Module:
    from embodied_core.config.resolve import load_config
    from embodied_models.lingbot_va.modeling import LingBotVAModel

    model = {"num_attention_heads": args.width // 128, "attention_head_dim": 128, "ffn_dim": args.width * 4,
             "num_layers": args.layers, "in_channels": 48, "out_channels": 48, "action_dim": 30,
             "used_action_channel_ids": list(range(7)), "text_dim": 4096, "text_len": 512, "freq_dim": 256,
             "gradient_checkpointing": False}
    data = {"image_size": [128, 128], "action_dim": 7, "num_latent_frames": args.frames, "action_per_frame": 4,
            "action_horizon": 4 * args.frames}
    config = load_config(training={"model_name": "lingbot_va_libero"}, model=model, data=data)
    torch.manual_seed(0)
    return LingBotVAModel(config.model, config.data).to(device)


def _batch(model: torch.nn.Module, device: torch.device) -> dict[str, torch.Tensor]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lingbot_va_step import _batch as make_batch

    return {k: v.to(device) for k, v in make_batch(model, 1).items()}


def time_granularity(unit: type, args: argparse.Namespace, device: torch.device) -> float:
    """Median step time with FSDP2 units of class ``unit`` on a 1-rank mesh (reshard after forward off)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = _model(args, device)
    mesh = init_device_mesh(device.type, (1,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    units = [m for m in model.modules() if isinstance(m, unit)]
    for module in reversed(units):
        fully_shard(module, mesh=mesh, reshard_after_forward=False, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=False, mp_policy=policy)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    batch = _batch(model, device)
    times = []
    for step in range(args.steps + 3):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        model(batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= 3:  # warm-up: compilation of flex attention, allocator growth
            times.append(time.perf_counter() - start)
    print(f"FSDP2 units = {unit.__name__:<12} ({len(units)} units) width {args.width} x {args.layers} layers, "
          f"{args.frames} latent frames: median step {statistics.median(times) * 1e3:.1f} ms ({device.type})")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=1536)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    import torch.distributed as dist

    from embodied_models.lingbot_va.blocks import LingBotBlock

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        flex_vs_dense()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29731")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)
    try:
        for unit in (LingBotBlock, torch.nn.Linear):
            time_granularity(unit, args, device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
