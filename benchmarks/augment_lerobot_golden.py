"""Writes ``tests/fixtures/augment_lerobot/``: lerobot 0.6.1's own ``ImageTransforms`` (the ``ImageTransformsConfig``
defaults, enabled) applied to synthetic uint8 frames, the golden of the ``lerobot`` augmentation preset.

lerobot-train decodes uint8 frames (``return_uint8=True``) and calls the transform once per camera, in the dataset's
camera order, on the camera's ``[T, C, H, W]`` window (``[C, H, W]`` without time offsets), all from torch's global
RNG. Each case here seeds that RNG with ``torch.manual_seed(seed)`` and transforms its cameras in order: the draws
our pipeline makes for a sample whose seed is ``seed``. Run in the lerobot side venv (setup_lerobot_venv.sh)::

    PYTHONPATH=. .venv-lerobot/bin/python benchmarks/augment_lerobot_golden.py

It prints each case and writes ``expected.json`` (settings, and per case and camera the sha256 of the input and
output frames and the transforms lerobot picked) and ``small.safetensors`` (the full outputs of the single-frame
48 x 64 case), about 65 KB. The inputs are :func:`benchmarks.augment_frames.camera_frames` (integer arithmetic),
which the test rebuilds and checks by sha256 first.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

import torch
from safetensors.torch import save_file

from benchmarks.augment_frames import camera_frames, sha256

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "augment_lerobot"
CASES = {  # name: ((H, W), cameras, frames per window (None: one [C, H, W] frame), seeds)
    "small_1cam_frame": ((48, 64), 1, None, (0, 1, 2, 3, 4, 5)),
    "small_2cam_window3": ((48, 64), 2, 3, (7, 8, 9)),
    "droid_240x352_1cam_frame": ((240, 352), 1, None, (11, 12)),
    "droid_240x352_3cam_window2": ((240, 352), 3, 2, (13,)),
    "odd_97x130_2cam_window4": ((97, 130), 2, 4, (21, 22, 23)),
    "odd_31x57_1cam_window2": ((31, 57), 1, 2, (31, 32, 33, 34)),
}


def main() -> None:
    from lerobot.transforms.transforms import ImageTransforms, ImageTransformsConfig

    config = ImageTransformsConfig(enable=True)
    transforms = ImageTransforms(config)
    names = {id(t): name for name, t in transforms.transforms.items()}
    expected: dict = {"lerobot": metadata.version("lerobot"), "torch": torch.__version__,
                      "torchvision": metadata.version("torchvision"),
                      "config": {**asdict(config), "tfs": {k: asdict(v) for k, v in config.tfs.items()}}, "cases": {}}
    small: dict[str, torch.Tensor] = {}
    for name, ((height, width), cameras, frames, seeds) in CASES.items():
        inputs = [camera_frames(height, width, camera=c, frames=frames) for c in range(cameras)]
        runs = []
        for seed in seeds:
            torch.manual_seed(seed)
            run = {"seed": seed, "cameras": []}
            for c, x in enumerate(inputs):
                out = transforms(x)
                assert out.dtype == torch.uint8 and out.shape == x.shape
                picked = [names[id(t)] for t in transforms.tf.selected_transforms]
                run["cameras"].append({"input": sha256(x), "output": sha256(out), "transforms": picked})
                if height == 48 and frames is None:
                    small[f"{name}/{seed}/{c}"] = out.contiguous()
            runs.append(run)
            print(name, seed, [cam["transforms"] for cam in run["cameras"]])
        expected["cases"][name] = {"size": [height, width], "cameras": cameras, "frames": frames, "runs": runs}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    save_file(small, str(OUT / "small.safetensors"))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
