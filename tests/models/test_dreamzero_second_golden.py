"""The ``dreamzero`` strategy against a second golden of LoongForge's own builder and collator at other settings.

``tests/fixtures/dreamzero_libero_13f/`` (written by ``benchmarks/dreamzero_second_golden.py`` with LoongForge
``c6275661``'s ``build_dreamzero_dataset`` and ``DefaultDataCollator`` on the shared ``dreamzero_libero_v21`` set):
13 frames in 3 chunks of 3 actions, padding to 10 / 9, 20 x 28 views from a 0.8 crop, seed 77, 20 text tokens, no
cache. As the shared golden: samples and batch equal, bit for bit (arrays up to 4 KB compared whole, the images
by sha256).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from embodied_models.dreamzero.data.collate import DreamZeroCollator
from embodied_models.dreamzero.data.config import DreamZeroDataConfig
from tests.models.test_dreamzero_strategy import ROOT, TOKENIZER, _dataset

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dreamzero_libero_13f"
OURS = ("embodiment_tag", "image_height", "image_width", "crop_scale", "enable_color_jitter",
        "use_sample_transform_seed", "sample_transform_seed", "max_text_length")


@pytest.fixture(scope="module")
def golden() -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    return json.loads((FIXTURE / "expected.json").read_text()), load_file(str(FIXTURE / "tensors.safetensors"))


def _problems(desc: dict[str, Any], value: Any, tensors: dict[str, torch.Tensor], where: str) -> list[str]:
    if desc["type"] in ("ndarray", "tensor"):
        # numpy (the reference's samples) or torch (ours) holding the same values, as the shared golden's test
        array = value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        got = (str(array.dtype), list(array.shape), hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest())
        if got == (desc["dtype"], desc["shape"], desc["sha256"]):
            return []
        key, diff = desc.get("safetensors_key"), ""
        if key is not None and got[1] == desc["shape"]:
            delta = torch.from_numpy(array).double().reshape(-1) - tensors[key].double()
            diff = f", max abs diff {delta.abs().max()}"
        return [f"{where}: {got[:2]} vs {desc['dtype'], desc['shape']}{diff}"]
    if value != desc["value"] or type(value).__name__ != desc["type"]:
        return [f"{where}: {value!r} != {desc['value']!r}"]
    return []


def test_samples_and_batch_equal_the_reference_at_13_frames(golden: tuple) -> None:
    doc, tensors = golden
    model, data = doc["model_cfg"], doc["data_cfg"]
    config = DreamZeroDataConfig(num_frames=model["num_frames"], action_horizon=model["action_horizon"],
                                 state_horizon=model["state_horizon"], max_chunk_size=model["max_chunk_size"],
                                 num_frame_per_block=1, max_state_dim=model["max_state_dim"],
                                 max_action_dim=model["max_action_dim"], **{key: data[key] for key in OURS})
    ds, _ = _dataset("dreamzero_libero_v21", config, backend="pyav", root=ROOT / "dreamzero_libero_v21")
    assert len(ds) == doc["dataset_len"] == 85
    problems, samples = [], {}
    for item in doc["items"]:
        position = item["position"]
        info = ds.index.query(position).info
        if (info["trajectory_id"], info["base_index"]) != (item["trajectory_id"], item["base_index"]):
            problems.append(f"{position}: anchor {info['trajectory_id'], info['base_index']}")
        sample = samples[position] = ds[position]
        if set(sample) != set(item["sample"]):
            problems.append(f"{position}: keys differ by {sorted(set(sample) ^ set(item['sample']))}")
            continue
        for key, desc in item["sample"].items():
            problems += _problems(desc, sample[key], tensors, f"{position}.{key}")
    collator = DreamZeroCollator(TOKENIZER, max_length=data["max_text_length"], num_views=2)
    batch = dict(collator([samples[p] for p in doc["batch"]["positions"]]))
    expected = doc["batch"]["value"]
    assert set(batch) == set(expected), sorted(set(batch) ^ set(expected))
    for key, desc in expected.items():
        problems += _problems(desc, batch[key], tensors, f"batch.{key}")
    assert not problems, problems
