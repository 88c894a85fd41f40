"""DreamZero caches in LoongForge's own form: its file name templates, and caches without a manifest.

LoongForge's writer (``tools/data_preprocess/embodied/dreamzero/cache_precompute/storage.py``) stores one
``torch.save({"video_latents": [C, T', h, w], "prompt_embs": [L, D]})`` per sample, bfloat16 by default
(``--dtype bf16``; prompt embeddings always bfloat16), named by ``--cache-template`` from (flat index,
trajectory id, base index). Such a cache without a manifest is read with ``data.cache_validation`` 'shapes' or 'off'.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from embodied_core.config.converter import structure
from embodied_core.errors import ConfigError, DataError
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_models.dreamzero.data.config import DreamZeroDataConfig
from embodied_models.dreamzero.data.strategy import plan_dreamzero
from tests.support import DATASETS_DIR

LIBERO = DATASETS_DIR / "strategies" / "dreamzero_libero_v21"
TOKENIZER = DATASETS_DIR / "strategies" / "tokenizers" / "umt5_tiny"
TEMPLATE = "cache_{trajectory_id:04d}_{base_index:04d}.pt"  # LoongForge's form
# dreamzero_tiny on the LIBERO layout: 9 frames -> 3 latent frames, 32 x 64 frames / 16 -> 2 x 4, z_dim 4;
# text_len 64, text_dim 8
LATENTS, PROMPT = (4, 3, 2, 4), (64, 8)


def _steps() -> list[tuple[int, int]]:
    """(trajectory id, base index) of every flat sample index of the LIBERO fixture (all frames of all episodes)."""
    rows = [json.loads(line) for line in (LIBERO / "meta" / "episodes.jsonl").read_text().splitlines() if line]
    return [(int(r["episode_index"]), step) for r in rows for step in range(int(r["length"]))]


def _write(path: Path, video: tuple[int, ...] = LATENTS, prompt: tuple[int, ...] = PROMPT,
           dtype: torch.dtype = torch.bfloat16) -> None:
    torch.save({"video_latents": torch.randn(video).to(dtype), "prompt_embs": torch.randn(prompt).to(dtype)}, path)


@pytest.fixture(scope="module")
def loongforge_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache as LoongForge's tool leaves it when no manifest is kept: sample files only."""
    cache = tmp_path_factory.mktemp("lf_cache")
    torch.manual_seed(0)
    for trajectory, base in _steps():
        _write(cache / TEMPLATE.format(index=0, trajectory_id=trajectory, base_index=base))
    return cache


def _data(cache: Path, **overrides: object) -> DreamZeroDataConfig:
    settings = dict(embodiment_tag="libero_sim", num_frames=9, action_horizon=4, max_chunk_size=2,
                    num_frame_per_block=1, max_state_dim=16, max_action_dim=12, image_height=32, image_width=32,
                    enable_color_jitter=False, max_text_length=64, precomputed_cache_dir=str(cache),
                    cache_template=TEMPLATE)
    return DreamZeroDataConfig(**{**settings, **overrides})


def test_template_fields_are_the_readers() -> None:
    assert DreamZeroDataConfig(cache_template=TEMPLATE).validate() == []
    assert DreamZeroDataConfig(cache_template="{index}/{trajectory_id}_{base_index:03d}.pt").validate() == []
    for template, message in (("s_{idx:04d}.pt", r"uses \{idx\}.*valid fields: \{index\}, \{trajectory_id\}, "
                                                 r"\{base_index\}"),
                              ("s_{trajectory_id}.pt", r"one file per sample.*both \{trajectory_id\} and "
                                                       r"\{base_index\}"),
                              ("s_{index:q}.pt", "cannot be formatted"), ("s_{}.pt", r"uses \{\}")):
        problems = DreamZeroDataConfig(cache_template=template).validate()
        assert len(problems) == 1 and problems[0].startswith(f"data.cache_template={template!r}"), problems
        assert re.search(message, problems[0]), problems[0]


def test_validation_options_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"data\.cache_validation"):
        structure({"cache_validation": "hash"}, DreamZeroDataConfig, path="data")
    problems = DreamZeroDataConfig(cache_validation="shapes", cache_validate_sample_hash=True,
                                   cache_require_full_coverage=True).validate()
    assert len(problems) == 2 and all("data.cache_validation=manifest" in p for p in problems)
    assert DreamZeroDataConfig().validates_sample_hash and not DreamZeroDataConfig(
        cache_validation="off").validates_sample_hash
    assert not DreamZeroDataConfig(cache_validate_sample_hash=False).validates_sample_hash


def test_manifest_mode_refuses_a_cache_without_manifest_naming_the_option(loongforge_cache: Path) -> None:
    with pytest.raises(DataError, match=r"no manifest\.json.*data\.cache_validation=shapes"):
        plan_dreamzero(LeRobotMeta.load(LIBERO), _data(loongforge_cache))


def test_shapes_and_off_read_it(loongforge_cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    meta = LeRobotMeta.load(LIBERO)
    reader = plan_dreamzero(meta, _data(loongforge_cache, cache_validation="shapes")).transform.cache
    file = loongforge_cache / "cache_0001_0007.pt"
    got = reader.load(27, trajectory_id=1, base_index=7, frames=9)
    stored = torch.load(file, weights_only=True)
    assert got["video_latents"].dtype == torch.bfloat16 and torch.equal(got["video_latents"], stored["video_latents"])
    with caplog.at_level(logging.WARNING, logger="embodied.dreamzero.data"):
        plan_dreamzero(meta, _data(loongforge_cache, cache_validation="off"))
        plan_dreamzero(meta, _data(loongforge_cache, cache_validation="off"))
    warnings = [r.getMessage() for r in caplog.records if "cache_validation=off" in r.getMessage()]
    assert len(warnings) == 1 and all(word in warnings[0] for word in ("manifest", "sha256", "dtype", "shapes"))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="embodied.dreamzero.data"):  # a manifest that 'shapes' leaves unread
        reader = plan_dreamzero(meta, _data(LIBERO / "precomputed_cache", cache_template="index_{index:08d}.pt",
                                            cache_validation="shapes", max_text_length=6)).transform.cache
    assert any("has a manifest.json, which is not checked" in r.getMessage() for r in caplog.records)
    assert reader.load(0, frames=9)["prompt_embs"].shape == (6, 8)


def test_wrong_shapes_name_the_file_and_key(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    steps = {(0, i): cache / TEMPLATE.format(index=0, trajectory_id=0, base_index=i) for i in range(6)}
    _write(steps[0, 0])
    _write(steps[0, 1], video=(4, 2, 2, 4))  # 2 latent frames for 9 video frames
    _write(steps[0, 2], prompt=(63, 8))  # not data.max_text_length rows
    _write(steps[0, 3], video=(4, 3, 2, 5))  # another latent grid than the first file's
    _write(steps[0, 4], dtype=torch.int32)
    torch.save({"latents": torch.zeros(1, *LATENTS), "prompt_embs": torch.zeros(PROMPT)}, steps[0, 5])
    shapes = plan_dreamzero(LeRobotMeta.load(LIBERO), _data(cache, cache_validation="shapes")).transform.cache
    shapes.load(0, trajectory_id=0, base_index=0, frames=9)
    cases = {1: r"cache_0000_0001\.pt: 'video_latents' has 2 latent frames .* 9 video frames encode to 3",
             2: r"cache_0000_0002\.pt: 'prompt_embs' has 63 rows .*max_text_length=64",
             3: r"cache_0000_0003\.pt: 'video_latents' has shape \[4, 3, 2, 5\], whose channels C and latent grid "
                r"h, w differ from .*cache_0000_0000\.pt",
             4: r"cache_0000_0004\.pt: 'video_latents' is torch\.int32",
             5: r"cache_0000_0005\.pt: 'latents' has shape \[1, 4, 3, 2, 4\]; video_latents is \[C, T', h, w\]"}
    for base, message in cases.items():
        with pytest.raises(DataError, match=message):
            shapes.load(base, trajectory_id=0, base_index=base, frames=9)
    off = plan_dreamzero(LeRobotMeta.load(LIBERO), _data(cache, cache_validation="off")).transform.cache
    assert off.load(4, trajectory_id=0, base_index=4, frames=9)["video_latents"].dtype == torch.int32  # no dtype check
    with pytest.raises(DataError, match=r"cache_0000_0001\.pt: 'video_latents' has 2 latent frames"):
        off.load(1, trajectory_id=0, base_index=1, frames=9)  # shapes still checked
    with pytest.raises(DataError, match=r"cache_0001_0000\.pt: no cached features for flat sample index 20"):
        off.load(20, trajectory_id=1, base_index=0, frames=9)


def test_numpy_video_latents(tmp_path: Path) -> None:
    """LoongForge also reads ``.npy`` files: bare video latents."""
    cache = tmp_path / "cache"
    cache.mkdir()
    latents = np.arange(np.prod(LATENTS), dtype=np.float32).reshape(LATENTS)
    np.save(cache / "lat_00000003.npy", latents)
    np.save(cache / "lat_00000004.npy", np.array([object()], dtype=object), allow_pickle=True)
    reader = plan_dreamzero(LeRobotMeta.load(LIBERO), _data(cache, cache_template="lat_{index:08d}.npy",
                                                              cache_features=["video_latents"],
                                                              cache_validation="shapes")).transform.cache
    assert np.array_equal(reader.load(3, frames=9)["video_latents"].numpy(), latents)
    with pytest.raises(DataError, match=r"lat_00000004\.npy: not a tensor-only numpy file"):
        reader.load(4, frames=9)  # pickled objects are refused, never loaded


@pytest.mark.slow
@pytest.mark.parametrize("validation", ["shapes", "off"])
def test_tiny_trains_on_the_loongforge_cache_without_encoders(loongforge_cache: Path, tmp_path: Path,
                                                              validation: str) -> None:
    """model.online_encoders=false: no VAE, no text encoder; the latents and prompt embeddings come from the cache."""
    from embodied_core.trainer.api import Trainer

    out = tmp_path / "run"
    Trainer({"training": {"model_name": "dreamzero_tiny", "dataset_format": "lerobot_datasets",
                          "dataset_path": str(LIBERO), "tokenizer_path": str(TOKENIZER), "num_workers": 0,
                          "per_device_batch_size": 2, "train_iters": 2, "log_interval": 1, "output_dir": str(out),
                          "save_interval": 0, "seed": 0},
             "model": {"online_encoders": False},
             "data": {"precomputed_cache_dir": str(loongforge_cache), "cache_template": TEMPLATE,
                      "cache_validation": validation}}).train()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(np.isfinite(r["loss"]) for r in rows)


def test_the_model_checks_channels_and_text_width(loongforge_cache: Path) -> None:
    from embodied_core.config.resolve import load_config
    from embodied_core.data.dataset import build_training_dataset
    from embodied_models.dreamzero.modeling import DreamZeroModel
    from embodied_models.dreamzero.transforms import make_transforms

    cfg = load_config("dreamzero_tiny", training={"dataset_format": "lerobot_datasets", "dataset_path": str(LIBERO)},
                      data={"state_dim": 8, "action_dim": 7, "tokenizer_path": str(TOKENIZER),
                            "precomputed_cache_dir": str(loongforge_cache), "cache_template": TEMPLATE,
                            "cache_validation": "shapes"})
    dataset = build_training_dataset(cfg.training, cfg.data)
    batch = make_transforms(cfg.model, cfg.data, stats=None).collate_fn([dataset[0], dataset[1]])
    model = DreamZeroModel(cfg.model, cfg.data)
    model.encode_inputs(batch)  # fits
    wide = dict(batch)
    wide["prompt_embs"] = torch.cat([batch["prompt_embs"], batch["prompt_embs"]], dim=-1)
    with pytest.raises(DataError, match=r"'prompt_embs' \(from data\.precomputed_cache_dir=.*\) are 16 wide, but "
                                        r"model\.text_dim=8"):
        model.encode_inputs(wide)
    deep = dict(batch)
    deep["video_latents"] = torch.cat([batch["video_latents"], batch["video_latents"]], dim=1)
    with pytest.raises(DataError, match=r"'video_latents' .* have 8 channels, but model\.out_dim=4"):
        model.encode_inputs(deep)
