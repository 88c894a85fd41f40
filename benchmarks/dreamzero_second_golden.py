"""Writes ``tests/fixtures/dreamzero_libero_13f/``: LoongForge's own dreamzero strategy (dataset builder,
per-sample transforms, collator) at settings the shared golden does not use.

The shared golden (``../shared/datasets/strategies/expected/dreamzero_libero_v21.dreamzero.json``) ran LoongForge's
``build_dreamzero_dataset`` on ``strategies/dreamzero_libero_v21`` with 9 frames, 2 chunks of 4 actions, padding to
16 / 12, 24 x 32 views, crop 0.95, seed 1234, 64 text tokens and a precomputed cache. This script runs the same
reference function (LoongForge ``c6275661``) on the same dataset with

- ``num_frames=13``, ``max_chunk_size=3``, ``action_horizon=3``: other windows (three chunks, 13 frames clamped into
  the 5-frame episode), other state / action rows;
- ``max_state_dim=10``, ``max_action_dim=9``: other padding widths and masks;
- ``image_height=20``, ``image_width=28`` and ``crop_scale=0.8``: another crop, another aspect, a real down-scale;
- ``sample_transform_seed=77``; ``max_text_length=20`` (the collator cuts every prompt); no cache, no colour jitter;

then its ``DefaultDataCollator`` on a batch. LoongForge's files are read from a LoongForge git directory
(``--loongforge``, default the mirror this project's tools fetch to) into a temporary folder at run time and deleted
after; package ``__init__`` files above ``dreamzero/`` are left empty (the real ones discover every model). Stand-ins,
none on the measured path: ``torchdata``'s ``StatefulDistributedSampler`` and ``loongforge.embodied.distributed``
(the builder's sampler code, not called), ``albumentations`` (only its ``backend="albumentations"`` transforms use
it). The dataset is copied to a temporary folder first (LoongForge writes missing statistics into it). Run it with
the lerobot side venv plus decord2 (LoongForge's DreamZero video backend), ftfy and dm-tree::

    .venv-lerobot/bin/python -m pip install decord2 ftfy dm-tree
    PYTHONPATH=. .venv-lerobot/bin/python benchmarks/dreamzero_second_golden.py

It writes ``expected.json`` (per position: trajectory, base index, crop draw, every sample key with its dtype,
shape and sha256; the batch's keys likewise and the tokenizer's input strings) and ``tensors.safetensors`` (every
sample array up to 4 KB and the batch's token ids and masks in full), about 80 KB.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "dreamzero_libero_13f"
STRATEGIES = Path("/work/shared/datasets/strategies")
DATASET = "dreamzero_libero_v21"
COMMIT = "c6275661"
MODEL = {"num_frames": 13, "action_horizon": 3, "state_horizon": 1, "max_chunk_size": 3, "max_state_dim": 10,
         "max_action_dim": 9, "precomputed_cache": None, "backbone_variant": "wan22_5b"}
DATA = {"embodiment_tag": "libero_sim", "image_height": 20, "image_width": 28, "crop_scale": 0.8,
        "enable_color_jitter": False, "use_sample_transform_seed": True, "sample_transform_seed": 77,
        "max_text_length": 20, "use_global_metadata": False, "metadata_version": None, "relative_action": False,
        "relative_action_keys": None, "relative_action_per_horizon": False, "language_chunk_sampling": False,
        "use_mixture_dataset": False, "mixture_sampling_seed": None, "balance_dataset_weights": True,
        "balance_trajectory_weights": True, "allow_padding_at_end": False}
POSITIONS = (0, 5, 19, 20, 31, 52, 53, 55, 57, 58, 66, 84)
"""Flat indices: each episode's first and last step, the 5-frame episode (53-57), ep 3's task switch (66)."""
BATCH = (0, 53, 57, 84)
SMALL = 4096
"""Sample arrays up to this many bytes are stored whole; larger ones (the images) by sha256."""


def extract(git_dir: Path, into: Path) -> None:
    """Writes LoongForge's DreamZero data package, its cache config and the transform registry at ``COMMIT``."""
    listing = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", COMMIT],
                             check=True, capture_output=True, text=True).stdout.split()
    wanted = [p for p in listing if p.endswith(".py") and (
        p.startswith("loongforge/embodied/data/datasets/dreamzero/")
        or p.startswith("loongforge/embodied/model/dreamzero/precomputed_cache/")
        or p.startswith("loongforge/embodied/data/datasets/transforms/"))]
    bare = {"loongforge/embodied/data/datasets/dreamzero/__init__.py"}
    for rel in wanted:
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text = "" if rel in bare else subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:{rel}"], check=True, capture_output=True,
            text=True).stdout
        target.write_text(text)
    for rel in wanted:
        for parent in Path(rel).parents:
            init = into / parent / "__init__.py"
            if parent != Path(".") and not init.exists():
                init.touch()


def install_stand_ins() -> None:
    """Modules the extracted files import at top level but whose code this run never calls."""
    sampler = types.ModuleType("torchdata.stateful_dataloader.sampler")
    sampler.StatefulDistributedSampler = type("StatefulDistributedSampler", (), {})
    distributed = types.ModuleType("loongforge.embodied.distributed")
    distributed.DistributedContext = type("DistributedContext", (), {})
    for name, module in {"torchdata": types.ModuleType("torchdata"),
                         "torchdata.stateful_dataloader": types.ModuleType("torchdata.stateful_dataloader"),
                         "torchdata.stateful_dataloader.sampler": sampler,
                         "loongforge.embodied.distributed": distributed,
                         "albumentations": types.ModuleType("albumentations")}.items():
        sys.modules.setdefault(name, module)


def sha256(array: np.ndarray) -> str:
    """sha256 of an array's contiguous bytes."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def describe(value: Any, key: str, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    """JSON description of one sample / batch value; small arrays go into ``tensors`` under ``key``."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        array = value.numpy() if isinstance(value, torch.Tensor) else value
        out = {"type": "tensor" if isinstance(value, torch.Tensor) else "ndarray", "dtype": str(array.dtype),
               "shape": list(array.shape), "sha256": sha256(array)}
        if array.nbytes <= SMALL:
            tensors[key] = torch.from_numpy(np.ascontiguousarray(array)).reshape(-1)
            out["safetensors_key"] = key
        return out
    if isinstance(value, (str, int, float, bool)) or value is None:
        return {"type": type(value).__name__, "value": value}
    if isinstance(value, (list, tuple)):
        return {"type": "list", "items": [describe(v, f"{key}.{i}", tensors) for i, v in enumerate(value)]}
    raise TypeError(f"{key}: cannot describe {type(value).__name__}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loongforge", type=Path, default=Path("/work/.mirror/baidu-baige+LoongForge/repo"),
                        help="a LoongForge git directory holding commit " + COMMIT)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        extract(args.loongforge, Path(tmp) / "src")
        sys.path.insert(0, str(Path(tmp) / "src"))
        install_stand_ins()
        dataset_root = Path(tmp) / DATASET
        shutil.copytree(STRATEGIES / DATASET, dataset_root, ignore=shutil.ignore_patterns("precomputed_cache"))
        from loongforge.embodied.data.datasets.dreamzero import builder
        from loongforge.embodied.data.datasets.dreamzero.transforms import dreamzero_collator

        tokenizer = str(STRATEGIES / "tokenizers" / "umt5_tiny")
        training_args = types.SimpleNamespace(dataset_path=str(dataset_root), tokenizer_path=tokenizer,
                                              video_backend="decord", seed=0)
        dataset = builder.build_dreamzero_dataset(types.SimpleNamespace(**MODEL), types.SimpleNamespace(**DATA),
                                                  training_args)
        tensors: dict[str, torch.Tensor] = {}
        items = []
        for position in POSITIONS:
            trajectory_id, base_index = (int(v) for v in dataset.all_steps[position])
            sample = dataset[position]
            items.append({"position": position, "trajectory_id": trajectory_id, "base_index": base_index,
                          "sample": {k: describe(v, f"{position}.{k}", tensors) for k, v in sample.items()}})
            print(position, trajectory_id, base_index, {k: getattr(v, "shape", v) for k, v in sample.items()
                                                        if k in ("images", "state", "action", "text")})
        collator = dreamzero_collator.DefaultDataCollator(tokenizer_path=tokenizer,
                                                          max_length=DATA["max_text_length"], num_views=2,
                                                          embodiment_tag_mapping=dreamzero_collator.__dict__.get(
                                                              "EMBODIMENT_TAG_TO_ID") or _tag_ids())
        batch = collator([dataset[p] for p in BATCH])
        batch_doc = {key: describe(value, f"batch.{key}", tensors) for key, value in batch.items()}
        for key in ("text", "text_attention_mask", "text_negative", "text_negative_attention_mask"):
            if key in batch and isinstance(batch[key], torch.Tensor):
                tensors[f"batch.{key}"] = batch[key].contiguous()
                batch_doc[key]["safetensors_key"] = f"batch.{key}"
    import decord
    import transformers
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"format": "dreamzero-second-golden-v1", "reference": f"baidu-baige/LoongForge@{COMMIT}",
           "function": "build_dreamzero_dataset + DefaultDataCollator", "dataset": f"strategies/{DATASET}",
           "tokenizer": "strategies/tokenizers/umt5_tiny", "model_cfg": MODEL, "data_cfg": DATA,
           "video_backend": "decord", "dataset_len": len(dataset),
           "generated_with": {"python": sys.version.split()[0], "torch": torch.__version__, "numpy": np.__version__,
                              "decord": decord.__version__, "transformers": transformers.__version__},
           "items": items, "batch": {"positions": list(BATCH), "value": batch_doc}}
    (args.out / "expected.json").write_text(json.dumps(doc, indent=1) + "\n")
    save_file(tensors, str(args.out / "tensors.safetensors"))
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"wrote {args.out} ({len(items)} samples, {size / 1000:.0f} KB)")


def _tag_ids() -> dict[str, int]:
    from loongforge.embodied.data.datasets.dreamzero.dataset.modality_configs import EMBODIMENT_TAG_TO_ID

    return EMBODIMENT_TAG_TO_ID


if __name__ == "__main__":
    main()
