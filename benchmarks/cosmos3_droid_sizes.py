"""Writes ``tests/fixtures/cosmos3_droid_sizes/``: the cosmos3_droid video path of LoongForge at camera sizes the
shared golden (48 x 64 only) does not have, recomputed with the reference's own operations.

The shared golden (``../shared/datasets/strategies/expected/cosmos3_droid_v30.cosmos3_droid.json``) was recorded
at 48 x 64 views, where the half-size exterior views are an exact 2 x 2 average and the canvas is never scaled.
This script replays the reference's pixel operations (LoongForge ``c6275661``) on frames of other sizes:

1. lerobot 0.5.0 ``decode_video_frames_torchcodec``: torchcodec's ``[T, 3, H, W]`` uint8 frames (a view of HWC
   memory) stacked with ``torch.stack``, then ``(frames / 255.0).type(torch.float32)``;
2. ``DROIDLeRobotDataset._load_concat_video`` / ``compose_concat_view``: the three cameras concatenated along T,
   each exterior view ``F.interpolate(..., (H // 2, W // 2), "bilinear", align_corners=False)`` in ``[T, 3, H, W]``,
   the two side by side below the wrist view; ``format_video_uint8``: ``* 255``, clamp, truncation to uint8,
   ``permute(1, 0, 2, 3)`` -> ``[3, T, 1.5 H, W]``;
3. ``Cosmos3ActionTransform``: frames cut to ``(T - 1) // 4 * 4 + 1``; the "480" bucket closest in H / W ratio;
   ``torchvision.transforms.functional.resize(video, ..., BICUBIC, antialias=True)`` on the ``[3, T, H, W]`` uint8
   video (torchvision casts it to float32, treats it as N = 3 images of T channels, clamps, rounds); ``pad`` on the
   bottom and right, ``edge`` when a pad is at least the content's side, else ``reflect``.

It needs torchvision (the reference used 0.28.0 on torch 2.13.0+cpu; not a dependency of this project), e.g.::

    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch torchvision safetensors
    PYTHONPATH=. /tmp/tv/bin/python benchmarks/cosmos3_droid_sizes.py

A CUDA build of torchvision on a CPU torch needs its operator schemas declared before import; the script does that
when the import fails for that reason (no torchvision C++ operator runs here). It prints each case and writes
``expected.json`` (sha256 of every input and output tensor, shapes, settings) and ``crops.safetensors`` (exact crops
of each output: the seam between the wrist and exterior views, the seam between the two exterior views, the pad
boundary, a stride-16 grid of frame 0), about 130 KB in all. The inputs are :func:`camera_frames` (integer
arithmetic, the same on every machine), so the test rebuilds them and checks their sha256 first.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "cosmos3_droid_sizes"
FRAMES = 5  # a window of action_chunk_length=4 + 1 rows: 5 frames, all kept ((5 - 1) // 4 * 4 + 1)
CASES = {  # name: (H, W) of each camera
    "droid_180x320": (180, 320),  # DROID's recorded size: canvas 270 x 320 in the 544 x 736 (4:3) bucket, edge pad
    "view_240x352": (240, 352),  # canvas 360 x 352 in 640 x 640, reflect pad
    "odd_97x130": (97, 130),  # odd height and odd half width (48 x 65 exterior views)
    "scaled_480x640": (480, 640),  # canvas 720 x 640 scaled to 640 x 569 (bicubic), reflect pad
    "tall_121x84": (121, 84),  # canvas 181 x 84 in the 9:16 bucket (832 x 480), edge pad
}
BUCKETS_480 = {"1,1": (640, 640), "4,3": (736, 544), "3,4": (544, 736), "16,9": (832, 480), "9,16": (480, 832)}
"""LoongForge's VIDEO_RES_SIZE_INFO["480"]: (width, height) per aspect key."""


def camera_frames(height: int, width: int, *, camera: int, frames: int = FRAMES) -> torch.Tensor:
    """``[T, H, W, 3]`` uint8 frames of one camera: hashed noise over a gradient, a saturated 0 / 255 checkerboard
    in the top-left quarter (bicubic overshoot is clamped there) and a flat band (exact values survive)."""
    t, y, x, c = torch.meshgrid(torch.arange(frames), torch.arange(height), torch.arange(width), torch.arange(3),
                                indexing="ij")
    h = (x * 73856093) ^ (y * 19349663) ^ (t * 83492791) ^ ((c + 3 * camera) * 2654435761)
    h = ((h ^ (h >> 13)) * 1274126177) & 0xFFFFFFFF
    value = (x * 255 // max(1, width - 1) + y * 97 // max(1, height - 1) + 40 * camera + (h >> 11) % 61) % 256
    board = ((x // 3 + y // 2 + t) % 2) * 255
    value = torch.where((x < width // 4) & (y < height // 4), board, value)
    value = torch.where((y >= height // 2) & (y < height // 2 + 3), 128 + 16 * camera + c, value)
    return value.to(torch.uint8)


def sha256(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's contiguous bytes."""
    return hashlib.sha256(tensor.contiguous().numpy().tobytes()).hexdigest()


def crops(video: torch.Tensor, *, wrist_h: int, half_w: int, content: tuple[int, int] | None) -> dict[str, list]:
    """``name -> [[start, stop] per dim]`` of the crops stored for a ``[3, T, H, W]`` video (None dims: all)."""
    _, frames, height, width = video.shape
    out = {"wrist_exterior_seam": [[0, 3], [0, frames], [max(0, wrist_h - 4), min(height, wrist_h + 4)],
                                   [0, min(width, 48)]],
           "exterior_seam": [[0, 3], [0, 1], [wrist_h, min(height, wrist_h + wrist_h // 2)],
                             [max(0, half_w - 4), min(width, half_w + 4)]]}
    if content is not None:
        ch, cw = content
        out["pad_corner"] = [[0, 3], [0, 1], [max(0, ch - 6), min(height, ch + 6)],
                             [max(0, cw - 6), min(width, cw + 6)]]
    return out


def _reference_canvas(cameras: list[torch.Tensor]) -> torch.Tensor:
    """Steps 1-2 of the module docstring on ``[T, H, W, 3]`` uint8 frames (wrist, left, right)."""
    decoded = [(torch.stack(list(frames.permute(0, 3, 1, 2))) / 255.0).type(torch.float32) for frames in cameras]
    n = decoded[0].shape[0]
    stacked = torch.cat(decoded, dim=0)
    wrist, left, right = stacked[:n], stacked[n:2 * n], stacked[2 * n:]
    half = (wrist.shape[-2] // 2, wrist.shape[-1] // 2)
    left = F.interpolate(left, size=half, mode="bilinear", align_corners=False)
    right = F.interpolate(right, size=half, mode="bilinear", align_corners=False)
    video = torch.cat([wrist, torch.cat([left, right], dim=-1)], dim=-2)
    return (video * 255.0).clamp(0.0, 255.0).to(torch.uint8).permute(1, 0, 2, 3)


def _reference_fit(video: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int], tuple[int, int]]:
    """Step 3 of the module docstring (the video part of ``Cosmos3ActionTransform``)."""
    import torchvision.transforms.functional as TF

    _, frames, height, width = video.shape
    video = video[:, :min(frames, max(1, (frames - 1) // 4 * 4 + 1))]
    ratio = height / width
    key = min(BUCKETS_480, key=lambda k: abs(ratio - BUCKETS_480[k][1] / BUCKETS_480[k][0]))
    bucket_w, bucket_h = BUCKETS_480[key]
    scale = min(bucket_w / width, bucket_h / height, 1.0)
    new_h, new_w = int(scale * height + 0.5), int(scale * width + 0.5)
    if (new_h, new_w) != (height, width):
        video = TF.resize(video, size=[new_h, new_w], interpolation=TF.InterpolationMode.BICUBIC, antialias=True)
    pad_right, pad_bottom = bucket_w - new_w, bucket_h - new_h
    if pad_right or pad_bottom:
        mode = "edge" if pad_right >= new_w or pad_bottom >= new_h else "reflect"
        video = TF.pad(video, [0, 0, pad_right, pad_bottom], padding_mode=mode)
    return video, (bucket_h, bucket_w), (new_h, new_w)


def _import_torchvision() -> str:
    try:
        import torchvision
    except RuntimeError as exc:
        if "torchvision::nms" not in str(exc):
            raise
        library = torch.library.Library("torchvision", "DEF")  # a CUDA build's schemas on a CPU torch
        library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[name]
        import torchvision
    return str(torchvision.__version__)


def main() -> int:
    from safetensors.torch import save_file

    # LoongForge decodes and resizes inside DataLoader workers, which torch runs on one intra-op thread; the CPU
    # interpolation kernels' last bits depend on the thread count, so the reference is computed on one thread too.
    torch.set_num_threads(1)

    versions = {"torch": torch.__version__, "torchvision": _import_torchvision(), "intra_op_threads": 1}
    OUT.mkdir(parents=True, exist_ok=True)
    doc: dict = {"format": "cosmos3-droid-sizes-v1", "generated_with": versions, "frames": FRAMES,
                 "reference": "LoongForge c6275661 cosmos3_droid video path (benchmarks/cosmos3_droid_sizes.py)",
                 "cases": {}}
    tensors: dict[str, torch.Tensor] = {}
    for name, (height, width) in CASES.items():
        cameras = [camera_frames(height, width, camera=i) for i in range(3)]
        canvas = _reference_canvas(cameras)
        fitted, bucket, content = _reference_fit(canvas)
        case = {"camera_hw": [height, width], "inputs_sha256": [sha256(c) for c in cameras],
                "canvas": {"shape": list(canvas.shape), "sha256": sha256(canvas),
                           "frame0_sha256": sha256(canvas[:, :1])},
                "video": {"shape": list(fitted.shape), "sha256": sha256(fitted),
                          "frame0_sha256": sha256(fitted[:, :1]), "bucket_hw": list(bucket),
                          "content_hw": list(content)},
                "crops": {}}
        for kind, value, box in (("canvas", canvas, None), ("video", fitted, content)):
            scaled_wrist = height if box is None else round(height * content[0] / canvas.shape[-2])
            scaled_half = width // 2 if box is None else round(width // 2 * content[1] / width)
            for crop, slices in crops(value, wrist_h=scaled_wrist, half_w=scaled_half, content=box).items():
                key = f"{name}.{kind}.{crop}"
                tensors[key] = value[tuple(slice(lo, hi) for lo, hi in slices)].contiguous()
                case["crops"][key] = slices
            grid = f"{name}.{kind}.grid16"
            tensors[grid] = value[:, :1, ::16, ::16].contiguous()
            case["crops"][grid] = None
        doc["cases"][name] = case
        print(f"{name}: cameras {height}x{width} -> canvas {list(canvas.shape)} -> bucket {bucket}, content "
              f"{content}: {case['video']['sha256'][:12]}")
    save_file(tensors, str(OUT / "crops.safetensors"))
    (OUT / "expected.json").write_text(json.dumps(doc, indent=1) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({total / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
