"""The ``dreamzero`` strategy against LoongForge's golden files (``../shared/datasets/strategies/expected``).

Samples and batches must be bitwise equal with the reference's settings (and the documented switches where our
default differs: ``keep_empty_language_chunks`` for DROID's flat indices). Also: our defaults where the README marks
reference bugs, frames of torchcodec / pyav equal to the golden's decord frames, stats computed in memory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from embodied_core.errors import DataError, UsageError
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.strategies.base import make_strategy
from embodied_models.dreamzero.data.collate import DreamZeroCollator
from embodied_models.dreamzero.data.config import DreamZeroDataConfig
from embodied_models.dreamzero.data.strategy import plan_dreamzero
from embodied_models.dreamzero.data.transforms import normalize_q99
from embodied_models.dreamzero.data.video import draw_crop
from tests.support import DATASETS_DIR

ROOT = DATASETS_DIR / "strategies"
TOKENIZER = ROOT / "tokenizers" / "umt5_tiny"
SETTINGS: dict[str, dict[str, Any]] = {
    "dreamzero_libero_v21": dict(
        embodiment_tag="libero_sim", num_frames=9, action_horizon=4, state_horizon=1, max_chunk_size=2,
        max_state_dim=16, max_action_dim=12, image_height=24, image_width=32, crop_scale=0.95,
        enable_color_jitter=False, use_sample_transform_seed=True, sample_transform_seed=1234, max_text_length=64,
        precomputed_cache_dir="precomputed_cache"),
    "dreamzero_droid_v21": dict(
        embodiment_tag="oxe_droid", action_horizon=24, state_horizon=1, max_chunk_size=2, max_state_dim=16,
        max_action_dim=12, image_height=20, image_width=32, crop_scale=0.95, enable_color_jitter=False,
        use_sample_transform_seed=True, sample_transform_seed=99, max_text_length=80, relative_action=True,
        language_chunk_sampling=True),
}


def _config(name: str, **overrides: Any) -> DreamZeroDataConfig:
    return DreamZeroDataConfig(**{**SETTINGS[name], **overrides})


def _dataset(name: str, config: DreamZeroDataConfig, *, backend: str, root: Path | None = None,
             transform: bool = True) -> tuple[LeRobotDataset, Any]:
    meta = LeRobotMeta.load(root or ROOT / name)
    plan = plan_dreamzero(meta, config)
    ds = LeRobotDataset(meta.root, meta=meta, video_backend=backend, camera_keys=plan.camera_keys,
                        transform=plan.transform if transform else None, sample_index=plan.sample_index)
    return ds, plan


def _golden(name: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    doc = json.loads((ROOT / "expected" / f"{name}.dreamzero.json").read_text())
    return doc, load_file(ROOT / "expected" / f"{name}.dreamzero.safetensors")


def _check(desc: dict[str, Any], value: Any, st: dict[str, torch.Tensor], where: str) -> None:
    kind = desc["type"]
    if kind in ("tensor", "ndarray"):
        expected = st[desc["safetensors_key"]].reshape(desc["shape"])  # 0-d arrays are stored as [1]
        got = torch.as_tensor(value)
        assert got.dtype == expected.dtype and got.shape == expected.shape, (where, got.dtype, got.shape)
        assert torch.equal(got, expected), where
    elif kind == "dict":
        assert set(value) == set(desc["items"]), (where, sorted(set(value) ^ set(desc["items"])))
        for key, item in desc["items"].items():
            _check(item, value[key], st, f"{where}.{key}")
    else:
        assert value == desc["value"], where


@pytest.fixture(scope="module")
def collator() -> DreamZeroCollator:
    return DreamZeroCollator(TOKENIZER, max_length=64, num_views=2)


def _check_batch(doc: dict[str, Any], st: dict[str, torch.Tensor], ds: LeRobotDataset, positions: list[int],
                 max_length: int, num_views: int) -> None:
    batch_doc = doc["batch"]
    col = DreamZeroCollator(TOKENIZER, max_length=max_length, num_views=num_views)
    samples = [ds[p] for p in positions]
    batch = col(samples)
    _check(batch_doc["value"], dict(batch), st, "batch")
    calls = {call["field"]: call["strings"] for call in batch_doc["tokenizer_calls"]}
    assert [col.prompt(s["text"], s["embodiment_id"]) for s in samples] == calls["text"]
    assert [s["text_negative"] for s in samples] == calls["text_negative"]
    assert batch.to("cpu")["images"].dtype == torch.uint8


def test_libero_golden_samples_batch_and_cache() -> None:
    name = "dreamzero_libero_v21"
    doc, st = _golden(name)
    ds, _ = _dataset(name, _config(name), backend="pyav")
    assert len(ds) == doc["dataset_len"] == 85
    for item in doc["items"]:
        position = item["position"]
        info = ds.index.query(position).info
        assert (info["trajectory_id"], info["base_index"], info["flat_index"]) == (
            item["trajectory_id"], item["base_index"], item["flat_index_for_cache"])
        draw = draw_crop(48, 64, 0.95, training=True, generator=torch.Generator().manual_seed(1234 + position))
        params = item["random_draws"][0]["params"]
        assert (draw.top, draw.left, draw.height, draw.width) == (params["top"], params["left"], params["height"],
                                                                   params["width"])
        _check(item["sample"], ds[position], st, f"item {position}")
    _check_batch(doc, st, ds, doc["batch"]["positions"], max_length=64, num_views=2)


def test_droid_golden_with_the_reference_switch() -> None:
    name = "dreamzero_droid_v21"
    doc, st = _golden(name)
    ds, _ = _dataset(name, _config(name, keep_empty_language_chunks=True), backend="torchcodec")
    assert len(ds) == doc["dataset_len"] == 165  # every flat index, as the reference
    for item in doc["items"]:
        position = item["position"]
        if "error" in item:  # the reference crashes with IndexError; with the switch it is a DataError naming it
            with pytest.raises(DataError, match="no language chunk"):
                ds[position]
            continue
        sample = ds[position]
        assert ds.index.query(position).info["language_chunk_indices"] == item["language_chunk_indices"]
        _check(item["sample"], sample, st, f"item {position}")
    _check_batch(doc, st, ds, doc["batch"]["positions"], max_length=80, num_views=3)


def test_droid_default_skips_anchors_without_chunks() -> None:
    name = "dreamzero_droid_v21"
    doc, st = _golden(name)
    ds, _ = _dataset(name, _config(name), backend="torchcodec")
    assert len(ds) == 100  # 65 of the 165 flat indices have no valid language chunk
    errors = [item["position"] for item in doc["items"] if "error" in item]
    for flat in errors:
        with pytest.raises(KeyError):
            ds.index.position_of(flat)
    for item in doc["items"]:
        if item["position"] in (12, 89, 164):  # spot checks through the flat -> position map
            _check(item["sample"], ds[ds.index.position_of(item["position"])], st, f"flat {item['position']}")
    one, two = ds[ds.index.position_of(12)], ds[ds.index.position_of(0)]  # 1 and 2 language chunks
    with pytest.raises(DataError, match="require_full_language_chunks"):
        DreamZeroCollator(TOKENIZER, max_length=80, num_views=3)([one, two])
    full, _ = _dataset(name, _config(name, require_full_language_chunks=True), backend="torchcodec")
    assert 0 < len(full) < len(ds) and set(full.index.chunks.tolist()) == {2}


def _frame_sha(frames: torch.Tensor) -> list[str]:
    return [hashlib.sha256(f.contiguous().numpy().tobytes()).hexdigest() for f in frames]  # [C, H, W] bytes


@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
def test_frames_equal_the_golden_decord_frames(backend: str) -> None:
    """The reference's torchcodec path reads the previous frame for 26 of 85 frames; ours reads decord's."""
    for name, positions in (("dreamzero_libero_v21", (0, 54, 84)), ("dreamzero_droid_v21", (125,))):
        doc, _ = _golden(name)
        ds, _ = _dataset(name, _config(name, keep_empty_language_chunks=True), backend=backend, transform=False)
        layout = json.loads((ROOT / name / "meta" / "modality.json").read_text())["video"]
        items = [item for item in doc["items"] if item["position"] in positions]
        assert len(items) == len(positions)
        for item in items:
            sample = ds[item["position"]]
            for key, video in item["raw_video"].items():
                camera = layout[key.removeprefix("video.")]["original_key"]
                assert _frame_sha(sample[camera]) == [f["sha256"] for f in video["frames"]], (name, key)


def _copy_meta(name: str, tmp: Path, drop: tuple[str, ...]) -> Path:
    root = tmp / name
    shutil.copytree(ROOT / name / "meta", root / "meta")
    for sub in ("data", "videos"):
        (root / sub).symlink_to(ROOT / name / sub)
    for relative in drop:
        (root / relative).unlink()
    return root


def test_stats_are_computed_in_memory_when_missing(tmp_path: Path) -> None:
    for name in SETTINGS:
        config = _config(name, precomputed_cache_dir=None)
        stored = plan_dreamzero(LeRobotMeta.load(ROOT / name), config).transform
        root = _copy_meta(name, tmp_path, ("meta/stats.json",) + (
            ("meta/relative_stats_dreamzero.json",) if config.relative_action else ()))
        before = sorted(p.name for p in (root / "meta").iterdir())
        computed = plan_dreamzero(LeRobotMeta.load(root), config).transform
        assert sorted(p.name for p in (root / "meta").iterdir()) == before  # nothing written into the dataset
        for ours, theirs in zip((*computed.state, *computed.action), (*stored.state, *stored.action), strict=True):
            assert ours.relative == theirs.relative
            for q in ("q01", "q99"):  # same algorithm; numpy 2.4's float32 quantile can differ by one ulp from 2.2's
                torch.testing.assert_close(torch.as_tensor(getattr(ours, q)).float(),
                                           torch.as_tensor(getattr(theirs, q)).float(), rtol=3e-7, atol=1e-7)
        stats = computed.map_stats({})
        assert stats["action"]["q01"].shape == (sum(p.end - p.start for p in computed.action),)


def test_q99_passthrough_and_clamp() -> None:
    x = torch.tensor([[5.0, 0.5, -3.0, 0.25]])
    q01, q99 = torch.tensor([0.0, 0.5, 0.0, 0.0]), torch.tensor([10.0, 0.5, 1.0, 1.0])
    out = normalize_q99(x, q01, q99)
    assert out.tolist() == [[0.0, 0.5, -1.0, -0.5]]  # q01 == q99: raw value (then clamped); below q01: -1


def test_prompt_wording_and_literal_eval_switch(collator: DreamZeroCollator) -> None:
    prompt = collator.prompt("Put the bowl on the plate", 21)
    assert prompt.startswith("A multi-view video shows that a robot put the bowl on the plate The video is split")
    assert prompt.endswith("The robot put the bowl on the plate")  # no period, as the pretrained conditioning saw
    assert "['open it', 'x']" in collator.prompt("['open it', 'x']", 21)
    reference = DreamZeroCollator(TOKENIZER, max_length=64, num_views=2, literal_eval_tasks=True)
    assert "robot open it The video" in reference.prompt("['open it', 'x']", 21)
    with pytest.raises(UsageError, match="no DreamZero prompt template"):
        collator.prompt("x", 99)


def test_eval_centre_crop_and_seeded_color_jitter() -> None:
    name = "dreamzero_libero_v21"
    meta = LeRobotMeta.load(ROOT / name)
    base = _config(name, precomputed_cache_dir=None)
    raw, plan = _dataset(name, base, backend="pyav", transform=False)
    sample = raw[30]
    eval_plan = plan_dreamzero(meta, base, training=False)
    out = eval_plan.transform(dict(sample))
    assert "action" not in out and out["images"].shape == (9, 24, 64, 3)
    assert draw_crop(48, 64, 0.95, training=False, generator=None).top == 2
    jitter = plan_dreamzero(meta, _config(name, precomputed_cache_dir=None, enable_color_jitter=True)).transform
    plain = plan.transform(dict(sample))["images"]
    first, again = jitter(dict(sample))["images"], jitter(dict(sample))["images"]
    assert torch.equal(first, again) and not torch.equal(first, plain)


def test_bad_setups_are_clear_errors() -> None:
    meta = LeRobotMeta.load(ROOT / "dreamzero_libero_v21")
    with pytest.raises(DataError, match="needs videos"):
        plan_dreamzero(meta, DreamZeroDataConfig(embodiment_tag="oxe_droid"))
    from embodied_core.config.model_config import BaseDataConfig

    with pytest.raises(UsageError, match="needs a DreamZero model"):
        make_strategy("dreamzero").plan(meta, BaseDataConfig())
    problems = DreamZeroDataConfig(embodiment_tag="libero_sim", language_chunk_sampling=True).validate()
    assert any("oxe_droid sampling" in p for p in problems)
    with pytest.raises(ValueError, match="embodiment_tag"):
        DreamZeroDataConfig(embodiment_tag="gr1")


def test_vectorized_chunk_counts_equal_the_reference_walk() -> None:
    """The index builder's vectorized counts equal the per-step walk (DreamZero's order) on random segmentations."""
    from embodied_models.dreamzero.data.index import chunk_counts, language_chunks

    rng = np.random.default_rng(0)
    for _ in range(60):
        length = int(rng.integers(1, 130))
        cuts = np.sort(rng.integers(0, length, size=int(rng.integers(0, 4))))
        language = np.asarray([f"task {np.searchsorted(cuts, i, side='right') % 2}" for i in range(length)],
                              dtype=object)
        for chunks in (1, 2, 3):
            walked = [(len(v) - 1) // 8 if len(v) else 0
                      for v in (language_chunks(language, base, chunks)[0] for base in range(length))]
            assert chunk_counts(language, chunks).tolist() == walked, (length, cuts.tolist(), chunks)


def test_view_layouts_and_prompts_of_every_embodiment() -> None:
    from embodied_models.dreamzero.data.embodiments import EMBODIMENTS, compose_views, prompt_for

    views = [torch.full((2, 3, 4, 3), v + 1, dtype=torch.uint8) for v in range(3)]
    droid = compose_views(views, "droid_grid")  # wrist twice as wide on top, left | right below
    assert droid.shape == (2, 6, 8, 3) and droid[:, :3].unique().tolist() == [3]
    assert droid[:, 3:, :4].unique().tolist() == [1] and droid[:, 3:, 4:].unique().tolist() == [2]
    grid = compose_views(views, "grid_2x2")  # head | right over left | black
    assert grid[:, :3, :4].unique().tolist() == [1] and grid[:, 3:, :4].unique().tolist() == [2]
    assert grid[:, :3, 4:].unique().tolist() == [3] and grid[:, 3:, 4:].unique().tolist() == [0]
    assert compose_views(views[:2], "libero_side_by_side").shape == (2, 3, 8, 3)
    assert {e.tag: e.id for e in EMBODIMENTS.values()} == {"oxe_droid": 17, "libero_sim": 21, "agibot": 26, "yam": 32}
    assert "four views: The top-left view shows the top camera" in prompt_for("Fold", 32, num_views=3)
    assert prompt_for("Fold", 26, num_views=3).endswith("(inactive view). The robot fold")
    with pytest.raises(UsageError):
        prompt_for("Fold", 26, num_views=1)
