"""LingBot-VA on one device: FSDP2 unit granularity (one unit per block vs one per Linear) and attention backends.

Shards a mid-size LingBot-VA (``--width``/``--layers``, LIBERO token layout) with ``fully_shard`` on a 1-rank
mesh (bf16 compute, fp32 reduce, reshard after forward off, as ``examples/lingbot_va/train.sh``), once with one
unit per ``LingBotBlock`` and once with one unit per ``nn.Linear``, and prints the median step time of each. (The
trainer itself does not wrap a 1-process run, so this is measured directly.) On CUDA it first checks the
flex-attention path against the dense-mask SDPA path on the golden fixture.

``--variants`` picks the runs (``unit:attention:mode``, e.g. ``block:sdpa:compile``): FSDP2 units ``block`` or
``linear``, attention ``auto`` (flex on CUDA), ``sdpa`` or ``flex``, and ``eager`` or ``compile`` (the trainer's
``--compile``: ``compile_blocks`` before ``fully_shard``). Each run prints its median step time, peak memory (CUDA)
and MFU: 6 x (the parameters of the transformer blocks' Linear layers) per token for forward + backward, plus the
dense attention matmuls (12 x layers x width x sequence^2 per sample; the flex path skips masked blocks, so its
MFU by this count is an upper bound of the work done), over ``--peak-tflops``. ``--json`` writes the results.

Usage: python benchmarks/lingbot_va_granularity.py [--width 1536] [--layers 12] [--frames 8] [--steps 10]
       [--variants block:auto:eager linear:auto:eager] [--json out.json]
Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
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

    head_dim = min(128, args.width)
    model = {"num_attention_heads": args.width // head_dim, "attention_head_dim": head_dim, "ffn_dim": args.width * 4,
             "num_layers": args.layers, "in_channels": 48, "out_channels": 48, "action_dim": 30,
             "used_action_channel_ids": list(range(7)), "text_dim": args.text_dim, "text_len": args.text_len,
             "freq_dim": 256, "gradient_checkpointing": False, "attention_backend": args.attention}
    data = {"image_size": [args.image, args.image], "action_dim": 7, "num_latent_frames": args.frames,
            "action_per_frame": 4, "action_horizon": 4 * args.frames}
    config = load_config(training={"model_name": "lingbot_va_libero"}, model=model, data=data)
    torch.manual_seed(0)
    return LingBotVAModel(config.model, config.data).to(device)


def _batch(model: torch.nn.Module, device: torch.device) -> dict[str, torch.Tensor]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from lingbot_va_step import _batch as make_batch

    return {k: v.to(device) for k, v in make_batch(model, 1).items()}


def _flops_per_step(model: torch.nn.Module, blocks: list[torch.nn.Module], sequence: int, batch: int) -> float:
    """Forward + backward matmul FLOPs of one step (see the module doc)."""
    linear = sum(m.weight.numel() for b in blocks for m in b.modules() if isinstance(m, torch.nn.Linear))
    width = model.config.num_attention_heads * model.config.attention_head_dim
    return batch * (6 * linear * sequence + 12 * len(blocks) * width * sequence * sequence)


def time_granularity(unit: type, args: argparse.Namespace, device: torch.device, *, compile_: bool = False
                     ) -> dict[str, float | str]:
    """Median step time with FSDP2 units of class ``unit`` on a 1-rank mesh (reshard after forward off)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from embodied_models.lingbot_va.blocks import LingBotBlock

    model = _model(args, device)
    blocks = [m for m in model.modules() if isinstance(m, LingBotBlock)]
    sequence: list[int] = []
    blocks[0].register_forward_pre_hook(lambda module, inputs: sequence.append(inputs[0].shape[1]) or None)
    if compile_:
        from embodied_core.trainer.compile import compile_blocks

        compile_blocks(model)
    mesh = init_device_mesh(device.type, (1,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    units = [m for m in model.modules() if isinstance(m, unit)]
    for module in reversed(units):
        fully_shard(module, mesh=mesh, reshard_after_forward=False, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=False, mp_policy=policy)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    batch = _batch(model, device)
    times = []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for step in range(args.steps + args.warmup):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        model(batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= args.warmup:  # warm-up: compilation (flex attention, --compile), allocator growth
            times.append(time.perf_counter() - start)
    step_s = statistics.median(times)
    flops = _flops_per_step(model, blocks, sequence[0], batch["latents"].shape[0])
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else float("nan")
    mfu = flops / step_s / (args.peak_tflops * 1e12) if device.type == "cuda" else float("nan")
    backend = "flex" if model.transformer._use_flex(device) else "sdpa"
    print(f"FSDP2 units = {unit.__name__:<12} ({len(units)} units) width {args.width} x {args.layers} layers, "
          f"{args.frames} latent frames, {'compiled' if compile_ else 'eager'}, attention {backend}: median step "
          f"{step_s * 1e3:.1f} ms ({device.type}), sequence {sequence[0]}, {flops / 1e12:.3f} TFLOP/step"
          + (f", peak {peak:.0f} MiB, MFU {mfu:.1%}" if device.type == "cuda" else ""))
    return {"unit": unit.__name__, "units": len(units), "mode": "compile" if compile_ else "eager",
            "attention": args.attention, "step_ms": step_s * 1e3, "peak_mib": peak, "mfu": mfu,
            "tflop_per_step": flops / 1e12, "sequence": sequence[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=1536)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--image", type=int, default=128, help="frame size in pixels (latents are 1/16 of it)")
    parser.add_argument("--text-dim", type=int, default=4096)
    parser.add_argument("--text-len", type=int, default=512)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--variants", nargs="*", default=["block:auto:eager", "linear:auto:eager"],
                        help="unit:attention:mode runs (block|linear : auto|sdpa|flex : eager|compile)")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="for MFU on CUDA (H200 bf16 dense: 989)")
    parser.add_argument("--no-flex-check", dest="flex_check", action="store_false")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import torch.distributed as dist

    from embodied_models.lingbot_va.blocks import LingBotBlock

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda" and args.flex_check:
        flex_vs_dense()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29731")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)
    results = []
    try:
        for variant in args.variants:
            unit, attention, mode = variant.split(":")
            args.attention = attention
            results.append(time_granularity({"block": LingBotBlock, "linear": torch.nn.Linear}[unit], args, device,
                                            compile_=mode == "compile"))
    finally:
        dist.destroy_process_group()
    if args.json:
        args.json.write_text(json.dumps({"width": args.width, "layers": args.layers, "frames": args.frames,
                                         "device": device.type, "runs": results}, indent=2))


if __name__ == "__main__":
    main()
