"""Writes ``tests/fixtures/cosmos3_chunk4_tier256/``: LoongForge's own cosmos3_droid reader and per-sample
transform run at settings the shared golden does not use.

The shared golden (``../shared/datasets/strategies/expected/cosmos3_droid_v30.cosmos3_droid.json``) ran LoongForge's
builder: ``action_chunk_length`` 8, ``max_text_tokens`` 99999 (no truncation) and the ``"480"`` tier its builder
hard-codes. This script runs the same reference classes, ``DROIDLeRobotDataset`` and ``Cosmos3ActionTransform``
(LoongForge ``c6275661``), on the same dataset (``strategies/cosmos3_droid_v30``, 48 x 64 views) with

- ``action_chunk_length=4``: 5-frame windows, so the 6-frame episode 1 now gives samples (35 in all, against 21);
- ``max_text_tokens=48``: every caption is cut (they tokenize to about 240 ids with the tiny tokenizer);
- ``resolution="256"``: the transform's own tier argument, which LoongForge's builder never passes (our
  ``data.resolution_tier``); the 72 x 64 canvas sits in the 256 x 256 bucket with edge padding;
- ``deterministic=True`` (caption alternative by ``random.Random(index)``; our ``caption_choice=position``), no
  augmentation, no CFG dropout, torchcodec.

LoongForge's files are read from a LoongForge git directory (``--loongforge``, default the mirror this project's
tools fetch to) into a temporary folder at run time; nothing of it is kept. Only the modules these two classes
import are extracted, with bare package ``__init__`` files (the real ones import the whole model stack). Run it
with the lerobot side venv (lerobot 0.6.1's ``decode_video_frames``: torchcodec frames ``/ 255.0``, as 0.5.0)::

    PYTHONPATH=. .venv-lerobot/bin/python benchmarks/cosmos3_second_golden.py

It writes ``expected.json`` (every sample's scalars, caption, token ids, sequence plan and the sha256 / sum of its
raw and transformed videos) and ``tensors.safetensors`` (actions, image sizes, and crops of some videos: the
content's bottom-right corner with the start of the edge padding), about 60 KB.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "cosmos3_chunk4_tier256"
DATASET = Path("/work/shared/datasets/strategies/cosmos3_droid_v30")
TOKENIZER = Path("/work/shared/datasets/strategies/tokenizers/qwen3vl_tiny")
COMMIT = "c6275661"
SETTINGS = {"action_chunk_length": 4, "max_text_tokens": 48, "resolution": "256", "action_fps": 15.0,
            "deterministic": True, "cfg_dropout_rate": 0.0, "max_action_dim": 64, "temporal_compression": 4,
            "video_backend": "torchcodec"}
CROPPED = (0, 16, 17, 34)
"""Positions whose transformed video keeps a crop: the first, the two of the 6-frame episode, the last."""
FILES = (
    "loongforge/embodied/data/datasets/cosmos3/droid_lerobot_dataset.py",
    "loongforge/embodied/data/datasets/cosmos3/transforms/cosmos3_action_transform.py",
    "loongforge/embodied/data/datasets/transforms/base.py",
    "loongforge/embodied/data/datasets/transforms/registry.py",
    "loongforge/embodied/model/cosmos3/sequence_packing.py",
    "loongforge/embodied/model/cosmos3/data_and_condition.py",
    "loongforge/embodied/model/cosmos3/unified_3dmrope_utils.py",
)


def extract(git_dir: Path, into: Path) -> None:
    """Writes ``FILES`` at ``COMMIT`` under ``into`` with empty ``__init__.py`` in every package folder."""
    for rel in FILES:
        text = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:{rel}"], check=True,
                              capture_output=True, text=True).stdout
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        for parent in target.relative_to(into).parents:
            if parent != Path("."):
                (into / parent / "__init__.py").touch()


def sha256(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's contiguous bytes."""
    return hashlib.sha256(tensor.contiguous().numpy().tobytes()).hexdigest()


def video_record(video: torch.Tensor) -> dict[str, Any]:
    """Shape, dtype, sha256 and sum of a video tensor."""
    return {"shape": list(video.shape), "dtype": str(video.dtype).replace("torch.", ""), "sha256": sha256(video),
            "sum": float(video.double().sum())}


def plain(value: Any) -> Any:
    """JSON form of the transform's scalar outputs."""
    if torch.is_tensor(value):
        return value.tolist()
    if dataclasses.is_dataclass(value):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loongforge", type=Path, default=Path("/work/.mirror/baidu-baige+LoongForge/repo"),
                        help="a LoongForge git directory holding commit " + COMMIT)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        extract(args.loongforge, Path(tmp))
        sys.path.insert(0, tmp)
        from loongforge.embodied.data.datasets.cosmos3.droid_lerobot_dataset import DROIDLeRobotDataset
        from loongforge.embodied.data.datasets.cosmos3.transforms import cosmos3_action_transform as reference

        dataset = DROIDLeRobotDataset(root=str(DATASET), fps=SETTINGS["action_fps"],
                                      chunk_length=SETTINGS["action_chunk_length"],
                                      video_backend=SETTINGS["video_backend"], use_image_augmentation=False,
                                      colorjitter_on_gpu=False, deterministic=SETTINGS["deterministic"])
        transform = reference.Cosmos3ActionTransform(
            tokenizer_path=str(TOKENIZER), max_text_tokens=SETTINGS["max_text_tokens"],
            max_action_dim=SETTINGS["max_action_dim"], resolution=SETTINGS["resolution"],
            action_chunk_length=SETTINGS["action_chunk_length"],
            temporal_compression=SETTINGS["temporal_compression"], cfg_dropout_rate=SETTINGS["cfg_dropout_rate"])
        items, tensors = [], {}
        for position in range(len(dataset)):
            raw = dataset[position]
            sample = transform.apply(dict(raw))
            video = sample["video"]
            _, _, height, width = raw["video"].shape
            record = {"position": position, "raw_video": video_record(raw["video"]),
                      "raw_caption": raw["ai_caption"], "video": video_record(video)}
            for key in ("raw_action_dim", "domain_id", "fps", "idle_frames", "ai_caption", "text_token_ids",
                        "sequence_plan", "dataset_index", "episode_index", "start_frame", "task_index"):
                record[key] = plain(sample[key])
            tensors[f"{position}.action"] = sample["action"].contiguous()
            tensors[f"{position}.image_size"] = sample["image_size"].contiguous()
            if position in CROPPED:
                crop = [[0, 3], [0, video.shape[1]], [height - 4, height + 4], [width - 4, width + 4]]
                record["crop"] = crop
                tensors[f"{position}.crop"] = video[tuple(slice(a, b) for a, b in crop)].contiguous()
            items.append(record)
            print(f"{position:2d} ep {record['episode_index']} start {record['start_frame']} video "
                  f"{record['video']['shape']} tokens {len(record['text_token_ids'])} {record['ai_caption'][:50]!r}")
    import lerobot
    import torchvision
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"format": "cosmos3-second-golden-v1", "reference": f"baidu-baige/LoongForge@{COMMIT}",
           "classes": ["DROIDLeRobotDataset", "Cosmos3ActionTransform"], "dataset": "strategies/cosmos3_droid_v30",
           "tokenizer": "strategies/tokenizers/qwen3vl_tiny", "settings": SETTINGS, "dataset_len": len(dataset),
           "generated_with": {"python": sys.version.split()[0], "torch": torch.__version__,
                              "torchvision": torchvision.__version__, "lerobot": lerobot.__version__},
           "items": items}
    (args.out / "expected.json").write_text(json.dumps(doc, indent=1) + "\n")
    save_file(tensors, str(args.out / "tensors.safetensors"))
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"wrote {args.out} ({len(items)} samples, {size / 1000:.0f} KB)")


if __name__ == "__main__":
    main()
