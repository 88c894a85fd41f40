"""DreamZero's precomputed cache: ``embodied data precompute-dreamzero`` end to end (tiny random Wan VAE + UMT5,
two ranks, resume) and the start-up validation of a cache (stale or incomplete caches are DataErrors)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from embodied_core.errors import DataError
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_models.dreamzero.data.collate import DreamZeroCollator
from embodied_models.dreamzero.data.config import DreamZeroDataConfig
from embodied_models.dreamzero.data.precompute import encode_prompt, encode_video, main
from embodied_models.dreamzero.data.strategy import plan_dreamzero
from embodied_models.wan.text import UMT5TextEncoder
from embodied_models.wan.vae import load_vae
from tests.support import DATASETS_DIR, run_embodied

ROOT = DATASETS_DIR / "strategies"
LIBERO = ROOT / "dreamzero_libero_v21"
TOKENIZER = ROOT / "tokenizers" / "umt5_tiny"
SETTINGS = dict(embodiment_tag="libero_sim", num_frames=9, action_horizon=4, max_chunk_size=2, max_state_dim=16,
                max_action_dim=12, image_height=24, image_width=32, enable_color_jitter=False,
                use_sample_transform_seed=True, sample_transform_seed=1234, max_text_length=64)
OVERRIDES = [f"data.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in SETTINGS.items()]


@pytest.fixture(scope="module")
def encoders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Wan2.1-style VAE (z_dim 4, 8x spatial, 4x temporal) and UMT5 (width 8, vocab of umt5_tiny)."""
    from diffusers import AutoencoderKLWan
    from transformers import UMT5Config, UMT5EncoderModel

    folder = tmp_path_factory.mktemp("dreamzero_encoders")
    torch.manual_seed(0)
    AutoencoderKLWan(base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1,
                     temperal_downsample=[False, True, True], latents_mean=[0.1] * 4,
                     latents_std=[2.0] * 4).save_pretrained(str(folder / "vae"))
    UMT5EncoderModel(UMT5Config(vocab_size=384, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2,
                                relative_attention_num_buckets=8)).save_pretrained(str(folder / "text_encoder"))
    return folder


def _args(encoders: Path, cache: Path, *extra: str) -> list[str]:
    return [str(LIBERO), "--output", str(cache), "--vae-path", str(encoders / "vae"), "--text-encoder-path",
            str(encoders / "text_encoder"), "--tokenizer-path", str(TOKENIZER), "--episodes", "2",
            "--features", "video_latents,first_frame_latents,prompt_embs", *OVERRIDES,
            *extra]


def test_precompute_two_ranks_resume_and_training_reads_it(encoders: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    assert main(_args(encoders, cache, "--rank", "0", "--world-size", "2", "--limit", "1")) == 0
    assert "encoded 1 sample(s)" in capsys.readouterr().out
    assert main(_args(encoders, cache, "--rank", "0", "--world-size", "2")) == 0  # resumes rank 0's share
    out = capsys.readouterr().out
    assert "encoded 2 sample(s), kept 1" in out and "not complete" in out and not (cache / "_SUCCESS").exists()
    assert main(_args(encoders, cache, "--rank", "1", "--world-size", "2")) == 0
    out = capsys.readouterr().out
    assert "encoded 2 sample(s)" in out and "wrote the manifest" in out
    files = sorted(p.name for p in cache.glob("index_*.pt"))
    assert files == [f"index_{i:08d}.pt" for i in range(53, 58)]  # episode 2 = flat indices 53..57
    manifest = json.loads((cache / "manifest.json").read_text())
    assert manifest["coverage"] == {"dataset_len": 85, "processed": 5, "saved": 5, "selected": 5}

    config = DreamZeroDataConfig(**SETTINGS, precomputed_cache_dir=str(cache),
                                 cache_features=["video_latents", "first_frame_latents", "prompt_embs"])
    meta = LeRobotMeta.load(LIBERO)
    plan = plan_dreamzero(meta, config)  # the manifest validates against the dataset and the settings
    ds = LeRobotDataset(LIBERO, meta=meta, episodes=[2], video_backend="pyav", camera_keys=plan.camera_keys,
                        transform=plan.transform, sample_index=plan.sample_index)
    sample = ds[3]
    assert sample["video_latents"].shape == (4, 3, 3, 8) and sample["prompt_embs"].shape == (64, 8)
    vae = load_vae(encoders / "vae")
    torch.testing.assert_close(sample["video_latents"], encode_video(vae, sample["images"]))  # cached == online
    assert sample["first_frame_latents"].shape == (4, 3, 3, 8)
    torch.testing.assert_close(sample["first_frame_latents"],
                               encode_video(vae, sample["images"], first_frame_only=True))
    prompt = DreamZeroCollator(TOKENIZER, max_length=64, num_views=2).prompt(sample["text"], sample["embodiment_id"])
    online = encode_prompt(UMT5TextEncoder.from_folders(encoders / "text_encoder", TOKENIZER), prompt, text_len=64)
    torch.testing.assert_close(sample["prompt_embs"], online)

    assert main(_args(encoders, cache, "data.image_height=20")) == 2  # the cache was begun with 24
    assert "data.image_height: 24 -> 20" in capsys.readouterr().err
    bad = run_embodied("data", "precompute-dreamzero", *_args(encoders, tmp_path / "c2",
                                                              "data.use_sample_transform_seed=false"))
    assert bad.returncode == 2 and "use_sample_transform_seed=true is required" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_precompute_encodes_at_the_model_frame_size(encoders: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Frames are resized to the model's target size before the VAE (as the model's online encoder does), and a
    cache begun at another size is refused."""
    cache = tmp_path / "sized"
    args = [str(LIBERO), "--output", str(cache), "--vae-path", str(encoders / "vae"), "--episodes", "2",
            "--features", "video_latents", "--limit", "1", *OVERRIDES]
    assert main([*args, "--video-size", "32", "64"]) == 0
    (file,) = cache.glob("index_*.pt")
    latents = torch.load(file, weights_only=True)["video_latents"]
    assert latents.shape[-2:] == (4, 8)  # 32x64 through the 8x VAE (the strategy's frames are 24x64)
    assert main([*args, "--video-size", "16", "32"]) == 2
    assert "video_size" in capsys.readouterr().err


def _copy(tmp: Path) -> Path:
    root = tmp / "libero"
    shutil.copytree(LIBERO / "meta", root / "meta")
    shutil.copytree(LIBERO / "precomputed_cache", root / "precomputed_cache")
    for sub in ("data", "videos"):
        (root / sub).symlink_to(LIBERO / sub)
    return root


def _plan(root: Path, **overrides: object):
    config = DreamZeroDataConfig(**{**SETTINGS, "precomputed_cache_dir": "precomputed_cache", **overrides})
    return plan_dreamzero(LeRobotMeta.load(root), config)


def test_stale_or_incomplete_cache_is_a_data_error(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    plan = _plan(root)  # the shared fixture cache is valid
    assert plan.transform.cache is not None
    for overrides, message in (({"image_height": 20}, "image_height=24, this run has data.image_height=20"),
                               ({"sample_transform_seed": 7}, "sample_transform_seed=1234"),
                               ({"cache_features": ["first_frame_latents"]}, "no 'first_frame_latents'"),
                               ({"cache_template": "s_{index}.pt"}, "cache_template")):
        with pytest.raises(DataError, match=message) as info:
            _plan(root, **overrides)
        assert "precompute-dreamzero" in str(info.value)
    tasks = root / "meta" / "tasks.jsonl"
    tasks.write_text(tasks.read_text().replace("open the top drawer", "open the drawer"))
    with pytest.raises(DataError, match=r"meta/tasks.jsonl of .* changed since .*precompute-dreamzero"):
        _plan(root)
    shutil.copy(LIBERO / "meta" / "tasks.jsonl", tasks)
    (root / "precomputed_cache" / "_SUCCESS").unlink()
    with pytest.raises(DataError, match="_SUCCESS is missing: the cache is incomplete"):
        _plan(root)
    shutil.copy(LIBERO / "precomputed_cache" / "_SUCCESS", root / "precomputed_cache" / "_SUCCESS")
    payload = torch.load(root / "precomputed_cache" / "index_00000004.pt", weights_only=True)
    payload["video_latents"] = payload["video_latents"] + 1
    torch.save(payload, root / "precomputed_cache" / "index_00000004.pt")
    reader = _plan(root).transform.cache
    assert torch.equal(reader.load(5)["prompt_embs"], torch.load(
        LIBERO / "precomputed_cache" / "index_00000005.pt", weights_only=True)["prompt_embs"])
    with pytest.raises(DataError, match=r"differs from its manifest\.jsonl entry"):
        reader.load(4)
