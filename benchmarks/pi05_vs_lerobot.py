"""pi0.5 training step, ours vs lerobot 0.6.1's ``PI05Pytorch``: same weights, inputs, noise and time.

One step = forward, backward, AdamW step (lr 1e-4, weight decay 0.01), zero_grad, on one fixed batch. Both
sides compute the per-element flow-matching loss for the given noise and time and average it over the real
action dims (lerobot's policy reduction, which is ours). The weights are lerobot's own random init: lerobot
saves its ``state_dict`` once and ours loads that file through our strict loader (lerobot key layout -> our
names, ``load_pi05_checkpoint``), so the first losses must agree to float tolerance.

Each measurement runs in a fresh process, ours in our venv and lerobot in the side venv
(``benchmarks/setup_lerobot_venv.sh``), interleaved over ``--rounds``: ours eager, lerobot eager, ours with
``--compile`` (regional: ``embodied_core.trainer.compile.compile_blocks``), and with ``--lerobot-compile`` lerobot
with its own ``compile_model`` (whole forward compiled). Printed: median step time per side, the time ratios,
max |loss difference| over the steps, peak memory (RSS on CPU, ``max_memory_allocated`` on CUDA), and on CUDA
the MFU.

MFU counts matmul FLOPs per token: 6 x (the Linear/conv weights a token passes through) for forward and
backward, i.e. image tokens through SigLIP + projector + the VLM layers, prompt tokens through the VLM
layers, action tokens through the expert layers, plus 12 x layers x head_dim x heads x (query tokens x key
tokens) for the joint attention scores and values (forward 4, backward 8), and SigLIP's own attention likewise.
Embedding lookups, norms and elementwise ops are not counted. Peak: ``--peak-tflops`` (H200 bf16 dense: 989).

Sizes: ``mid`` (the issue's: VLM 256 wide x 4 layers, expert 128 wide, SigLIP 128 wide x 4, 2 cameras at 224,
chunk 50, batch 8), ``tiny`` (a smoke size) and ``full`` (the released pi0.5: PaliGemma 2B + 300M expert).

    .venv/bin/python benchmarks/pi05_vs_lerobot.py [--size mid] [--rounds 3] [--steps 5] [--no-compile]
    .venv/bin/python benchmarks/pi05_vs_lerobot.py --size full --device cuda --dtype bfloat16 --batch-size 32
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_LEROBOT_PYTHON = REPO / ".venv-lerobot" / "bin" / "python"

SIZES: dict[str, dict[str, int]] = {
    "tiny": {"vlm_width": 64, "vlm_mlp": 128, "expert_width": 32, "expert_mlp": 64, "depth": 2, "heads": 8,
             "head_dim": 8, "vision_width": 32, "vision_depth": 2, "vision_mlp": 64, "vision_heads": 2,
             "image": 56, "vocab": 1024, "tokens": 16, "chunk": 10, "batch": 2},
    "mid": {"vlm_width": 256, "vlm_mlp": 1024, "expert_width": 128, "expert_mlp": 512, "depth": 4, "heads": 8,
            "head_dim": 32, "vision_width": 128, "vision_depth": 4, "vision_mlp": 512, "vision_heads": 4,
            "image": 224, "vocab": 1024, "tokens": 48, "chunk": 50, "batch": 8},
    "full": {"vlm_width": 2048, "vlm_mlp": 16384, "expert_width": 1024, "expert_mlp": 4096, "depth": 18, "heads": 8,
             "head_dim": 256, "vision_width": 1152, "vision_depth": 27, "vision_mlp": 4304, "vision_heads": 16,
             "image": 224, "vocab": 257152, "tokens": 200, "chunk": 50, "batch": 32},
}
CAMERAS, PATCH, ACTION_DIM, REAL_ACTION_DIM = 2, 14, 32, 14


# ---------------------------------------------------------------------------------------------- inputs
def make_inputs(size: dict[str, int], batch: int, path: Path) -> None:
    """Images in [-1, 1], masks (camera 1 of the last element absent), prompt tokens with right padding,
    actions zero beyond the real dims, noise and flow-matching time; saved as safetensors."""
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(1, size["vocab"], (batch, size["tokens"]), generator=gen)
    lengths = torch.randint(size["tokens"] // 2, size["tokens"] + 1, (batch,), generator=gen)
    lang_mask = torch.arange(size["tokens"])[None] < lengths[:, None]
    actions = torch.zeros(batch, size["chunk"], ACTION_DIM)
    actions[..., :REAL_ACTION_DIM] = torch.randn(batch, size["chunk"], REAL_ACTION_DIM, generator=gen)
    masks = torch.ones(batch, CAMERAS, dtype=torch.bool)
    masks[-1, 1] = False
    save_file({"images": torch.rand(batch, CAMERAS, 3, size["image"], size["image"], generator=gen) * 2 - 1,
               "image_masks": masks, "lang_tokens": tokens * lang_mask, "lang_mask": lang_mask, "actions": actions,
               "noise": torch.randn(batch, size["chunk"], ACTION_DIM, generator=gen),
               "time": torch.distributions.Beta(1.5, 1.0).sample((batch,)) * 0.999 + 0.001}, str(path))


# ---------------------------------------------------------------------------------------------- models
def lerobot_model(size: dict[str, int], *, compile_model: bool) -> Any:
    """lerobot 0.6.1's PI05Pytorch at ``size``: its variants and the PaliGemma / expert configs resized as they
    are built (lerobot hard-codes the released sizes)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lerobot.policies.pi05 import modeling_pi05 as mp
    from lerobot.policies.pi05.configuration_pi05 import PI05Config

    def gemma(variant: str) -> Any:
        width, mlp = ((size["vlm_width"], size["vlm_mlp"]) if variant == "gemma_2b"
                      else (size["expert_width"], size["expert_mlp"]))
        return mp.GemmaConfig(width=width, depth=size["depth"], mlp_dim=mlp, num_heads=size["heads"],
                              num_kv_heads=1, head_dim=size["head_dim"])

    vlm_class, expert_class = mp.PaliGemmaForConditionalGenerationWithPiGemma, mp.PiGemmaForCausalLM

    def vlm(config: Any) -> Any:
        vision = config.vision_config
        vision.hidden_size, vision.num_hidden_layers = size["vision_width"], size["vision_depth"]
        vision.intermediate_size, vision.num_attention_heads = size["vision_mlp"], size["vision_heads"]
        vision.projection_dim = size["vlm_width"]
        config.text_config.vocab_size = config._vocab_size = size["vocab"]
        config.image_token_index = size["vocab"]
        return vlm_class(config=config)

    def expert(config: Any) -> Any:
        config.vocab_size = size["vocab"]
        return expert_class(config=config)

    mp.get_gemma_config, mp.PaliGemmaForConditionalGenerationWithPiGemma, mp.PiGemmaForCausalLM = gemma, vlm, expert
    # the released variant names (PI05Config checks them); get_gemma_config above gives them this size
    config = PI05Config(paligemma_variant="gemma_2b", action_expert_variant="gemma_300m", dtype="float32",
                        chunk_size=size["chunk"], n_action_steps=size["chunk"], max_action_dim=ACTION_DIM,
                        image_resolution=(size["image"], size["image"]), compile_model=compile_model,
                        compile_mode="default")
    return mp.PI05Pytorch(config)


def our_model(size: dict[str, int]) -> Any:
    from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig
    from embodied_models.pi05.modeling import Pi05Model

    model = Pi05ModelConfig(vlm_width=size["vlm_width"], vlm_mlp_dim=size["vlm_mlp"], vocab_size=size["vocab"],
                            expert_width=size["expert_width"], expert_mlp_dim=size["expert_mlp"],
                            depth=size["depth"], num_heads=size["heads"], num_kv_heads=1, head_dim=size["head_dim"],
                            vision_width=size["vision_width"], vision_depth=size["vision_depth"],
                            vision_mlp_dim=size["vision_mlp"], vision_num_heads=size["vision_heads"],
                            vision_patch_size=PATCH, max_action_dim=ACTION_DIM, max_token_len=size["tokens"])
    data = Pi05DataConfig(camera_keys=[f"cam{i}" for i in range(CAMERAS)], num_image_slots=CAMERAS,
                          image_size=(size["image"], size["image"]), action_dim=REAL_ACTION_DIM,
                          action_horizon=size["chunk"])
    return Pi05Model(model, data)


# ---------------------------------------------------------------------------------------------- FLOPs
def flops_per_step(size: dict[str, int], batch: int) -> float:
    """Forward + backward matmul FLOPs of one step (see the module doc)."""
    v, w, e, d = size["vision_width"], size["vlm_width"], size["expert_width"], size["depth"]
    hd, heads = size["head_dim"], size["heads"]
    img_tokens = (size["image"] // PATCH) ** 2
    vision_layer = 4 * v * v + 2 * v * size["vision_mlp"]
    vision = size["vision_depth"] * vision_layer + 3 * PATCH * PATCH * v + v * w  # + patch conv + projector
    kv = 2 * hd  # one KV head
    vlm_layer = w * heads * hd + w * kv + heads * hd * w + 3 * w * size["vlm_mlp"]
    expert_layer = e * heads * hd + e * kv + heads * hd * e + 3 * e * size["expert_mlp"] + 2 * 3 * e * e  # + adaRMS
    prefix = CAMERAS * img_tokens + size["tokens"]
    suffix = size["chunk"]
    dense = (CAMERAS * img_tokens * vision + prefix * d * vlm_layer + suffix * (d * expert_layer + 2 * e * ACTION_DIM))
    joint_attention = d * heads * hd * (prefix * prefix + suffix * (prefix + suffix)) * 2  # QK^T and AV, forward
    vision_attention = size["vision_depth"] * v * img_tokens * img_tokens * 2 * CAMERAS
    return batch * (6 * dense + 3 * 2 * (joint_attention + vision_attention))


# ---------------------------------------------------------------------------------------------- one side
def run_side(opts: argparse.Namespace) -> None:
    """One measurement in this process: prints a JSON line."""
    import torch
    from safetensors.torch import load_file, save_file

    if opts.threads:
        torch.set_num_threads(opts.threads)
    size = SIZES[opts.size]
    device = torch.device(opts.device)
    work = Path(opts.work)
    inputs = {k: v.to(device) for k, v in load_file(str(work / "inputs.safetensors")).items()}
    if opts.role == "lerobot":
        torch.manual_seed(0)
        with torch.device(device):  # built where it runs: the full size initializes in seconds on a GPU
            model = lerobot_model(size, compile_model=opts.compile)
        weights = work / "model.safetensors"
        if not weights.exists():  # the first lerobot run writes the weights every run loads
            save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
        model.load_state_dict(load_file(str(weights), device=str(device)), strict=True)
        images = [inputs["images"][:, c] for c in range(CAMERAS)]
        img_masks = [inputs["image_masks"][:, c] for c in range(CAMERAS)]

        def elements() -> Any:
            return model(images, img_masks, inputs["lang_tokens"], inputs["lang_mask"], inputs["actions"],
                         inputs["noise"], inputs["time"])
    else:
        from embodied_models.pi05.batch import Pi05PreparedBatch
        from embodied_models.pi05.checkpoint import load_pi05_checkpoint

        torch.manual_seed(1)  # another init than lerobot's: every value must come from the file
        with torch.device(device):
            model = our_model(size)
        report = load_pi05_checkpoint(model, work / "model.safetensors")
        if not report.ok:
            raise SystemExit(f"our strict loader refused lerobot's weights: {report}")
        batch = Pi05PreparedBatch(images=inputs["images"], image_masks=inputs["image_masks"],
                                  tokens=inputs["lang_tokens"], token_mask=inputs["lang_mask"],
                                  actions=inputs["actions"])
        if opts.compile:
            from embodied_core.trainer.compile import compile_blocks

            compile_blocks(model)

        def elements() -> Any:
            return model.loss_elements(batch, noise=inputs["noise"], time=inputs["time"])
    model.to(device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=opts.dtype == "bfloat16")
    times, losses = [], []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(opts.warmup + opts.steps):
        started = time.perf_counter()
        with autocast:
            loss = elements()[..., :REAL_ACTION_DIM].float().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
        losses.append(loss.item())
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps({"role": opts.role, "compile": opts.compile, "first_s": times[0],
                      "step_s": statistics.median(times[opts.warmup:]), "losses": losses, "peak_mib": peak}))


# ---------------------------------------------------------------------------------------------- driver
def _measure(python: Path, role: str, opts: argparse.Namespace, work: Path, *, compile_: bool) -> dict[str, Any]:
    argv = [str(python), str(Path(__file__).resolve()), "--role", role, "--work", str(work), "--size", opts.size,
            "--device", opts.device, "--dtype", opts.dtype, "--steps", str(opts.steps), "--warmup", str(opts.warmup),
            *(["--threads", str(opts.threads)] if opts.threads else []), *(["--side-compile"] if compile_ else [])]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=opts.timeout,
                            env={**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1"})
    if result.returncode != 0:
        raise RuntimeError(f"{role} (compile={compile_}) failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="mid")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the size's batch")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="bfloat16: autocast on both sides (fp32 weights)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps (compilation happens here)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads of both sides (default on CPU: 1, steady on a shared host)")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip the --compile measurement")
    parser.add_argument("--lerobot-compile", action="store_true", help="also lerobot with its compile_model")
    parser.add_argument("--lerobot-python", type=Path, default=DEFAULT_LEROBOT_PYTHON)
    parser.add_argument("--ours-only", action="store_true",
                        help="without lerobot (no side venv): ours eager vs compiled on our own random weights")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="for MFU on CUDA")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per measurement process")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here")
    parser.add_argument("--role", choices=["ours", "lerobot"], help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--side-compile", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.role:
        opts.compile = opts.side_compile
        return run_side(opts)
    if opts.threads is None and opts.device == "cpu":
        opts.threads = 1
    if not opts.ours_only and not opts.lerobot_python.exists():
        raise SystemExit(f"{opts.lerobot_python} not found: run bash benchmarks/setup_lerobot_venv.sh first, or pass "
                         "--ours-only")
    size = dict(SIZES[opts.size])
    if opts.batch_size:
        size["batch"] = opts.batch_size
    SIZES[opts.size] = size
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_inputs(size, size["batch"], work / "inputs.safetensors")
        plan = [("ours", False)] + ([] if opts.ours_only else [("lerobot", False)]) + (
            [("ours", True)] if opts.compile else []) + ([("lerobot", True)] if opts.lerobot_compile else [])
        runs: dict[tuple[str, bool], list[dict[str, Any]]] = {key: [] for key in plan}
        if opts.ours_only:
            write_our_weights(size, work / "model.safetensors")
        else:
            _measure(opts.lerobot_python, "lerobot", opts, work, compile_=False)  # writes the weights (untimed)
        for _ in range(opts.rounds):
            for role, compile_ in plan:
                python = Path(sys.executable) if role == "ours" else opts.lerobot_python
                runs[(role, compile_)].append(_measure(python, role, opts, work, compile_=compile_))
    summary = summarize(runs, size, opts)
    if opts.json:
        opts.json.write_text(json.dumps(summary, indent=2))


def write_our_weights(size: dict[str, int], path: Path) -> None:
    """``--ours-only``: our model's random init under our own names (the strict loader takes those too)."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    save_file({k: v.contiguous() for k, v in our_model(size).state_dict().items()}, str(path))


def summarize(runs: dict[tuple[str, bool], list[dict[str, Any]]], size: dict[str, int],
              opts: argparse.Namespace) -> dict[str, Any]:
    """Prints the comparison; returns it as a dict."""
    step = {k: statistics.median(r["step_s"] for r in v) for k, v in runs.items()}
    peak = {k: max(r["peak_mib"] for r in v) for k, v in runs.items()}
    base = ("ours", False) if ("lerobot", False) not in runs else ("lerobot", False)
    reference = runs[base][0]["losses"]
    flops = flops_per_step(size, size["batch"])
    print(f"pi05 {opts.size} (VLM {size['vlm_width']}x{size['depth']}, expert {size['expert_width']}, SigLIP "
          f"{size['vision_width']}x{size['vision_depth']}, {CAMERAS} cameras at {size['image']}, chunk "
          f"{size['chunk']}, batch {size['batch']}), {opts.dtype}, {opts.device}; fwd+bwd+AdamW, median of "
          f"{opts.steps} steps x {opts.rounds} fresh-process rounds, interleaved; {flops / 1e12:.3f} TFLOP per step")
    summary: dict[str, Any] = {"size": opts.size, "batch": size["batch"], "dtype": opts.dtype, "device": opts.device,
                               "tflop_per_step": flops / 1e12, "rows": []}
    for (role, compiled), values in runs.items():
        name = f"{role} {'compiled' if compiled else 'eager'}"
        diff = max(abs(a - b) for r in values for a, b in zip(r["losses"], reference, strict=True))
        ratio = step[(role, compiled)] / step[base]
        mfu = flops / step[(role, compiled)] / (opts.peak_tflops * 1e12) if opts.device.startswith("cuda") else None
        print(f"  {name:18s} step {step[(role, compiled)] * 1e3:8.1f} ms | {ratio:.2f}x {base[0]} eager's time | "
              f"max|loss diff| vs {base[0]} eager {diff:.2e} | peak {'memory' if mfu is not None else 'RSS'} "
              f"{peak[(role, compiled)]:.0f} MiB | first step {statistics.median(r['first_s'] for r in values):.1f} s"
              + (f" | MFU {mfu:.1%}" if mfu is not None else ""))
        summary["rows"].append({"name": name, "step_ms": step[(role, compiled)] * 1e3, "ratio": ratio,
                                "loss_diff": diff, "peak_mib": peak[(role, compiled)], "mfu": mfu})
    if ("lerobot", True) in step and ("ours", True) in step:
        print(f"  ours compiled / lerobot compiled: {step[('ours', True)] / step[('lerobot', True)]:.2f}x")
    return summary


if __name__ == "__main__":
    main()
