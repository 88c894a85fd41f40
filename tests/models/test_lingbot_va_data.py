"""LingBot-VA data path: precompute-latents with tiny random Wan2.2 VAE + UMT5, the lingbot_va strategy, the
model transforms, and training lingbot_va_tiny through ``embodied_core.Trainer`` (with an exact resume)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from embodied_core import Trainer
from embodied_core.config.resolve import load_config
from embodied_core.errors import DataError
from embodied_core.registry import groups, load_factory
from embodied_models.lingbot_va.cache import episode_file, read_cache_meta
from embodied_models.lingbot_va.precompute import main as precompute_main
from embodied_models.lingbot_va.precompute import precompute_latents
from embodied_models.lingbot_va.transforms import make_transforms
from tests.support import DATASETS_DIR

DATASET = DATASETS_DIR / "lerobot_written" / "v21"
WORDS = ["pick", "the", "red", "cube", "stack", "blue", "block"]


def _base_model(folder: Path) -> Path:
    """A BASE_MODEL_PATH-style folder with a tiny random Wan2.2-style VAE (z_dim 8), UMT5 and tokenizer."""
    from diffusers import AutoencoderKLWan
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, UMT5Config, UMT5EncoderModel

    torch.manual_seed(0)
    AutoencoderKLWan(base_dim=8, z_dim=8, dim_mult=[1, 2, 2, 2], num_res_blocks=1,
                     temperal_downsample=[False, True, True], is_residual=True, in_channels=12, out_channels=12,
                     patch_size=2, scale_factor_spatial=16,
                     latents_mean=[0.1] * 8, latents_std=[2.0] * 8).save_pretrained(str(folder / "vae"))
    UMT5EncoderModel(UMT5Config(vocab_size=16, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2,
                                relative_attention_num_buckets=8)).save_pretrained(str(folder / "text_encoder"))
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(str(folder / "tokenizer"))
    return folder


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lingbot")
    base = _base_model(root / "base")
    config = load_config(training={"model_name": "lingbot_va_tiny"}, data={"latent_cache": str(root / "cache")})
    # Two "ranks" share the episodes; rank 0 also writes meta.json and the text embeddings.
    for rank in (1, 0):
        result = precompute_latents(DATASET, base_model_path=base, data_config=config.data,
                                    text_len=config.model.text_len, rank=rank, world_size=2, device="cpu",
                                    dtype=torch.float32)
        assert result.encoded == ((1, 3) if rank else (0, 2)) and not result.skipped
    return root


def _config(root: Path, **training):
    return {"training": {"model_name": "lingbot_va_tiny", "dataset_format": "lerobot_datasets",
                         "dataset_path": str(DATASET), "lerobotdataset_version": "v2.1",
                         "dataset_strategy": "lingbot_va", "trainer_type": "lingbot_va", "num_workers": 0,
                         "per_device_batch_size": 2, "dtype": "float32", "seed": 7, **training},
            "data": {"latent_cache": str(root / "cache")}}


def test_precompute_cache_layout_and_resume(cache, capsys):
    meta = read_cache_meta(cache / "cache", command_hint="")
    assert meta["camera_keys"] == ["observation.images.front", "observation.images.wrist"] and meta["z_dim"] == 8
    from safetensors.torch import load_file

    ep0 = load_file(str(episode_file(cache / "cache", 0)))
    # 37 frames = 4 * 9 + 1 -> 10 latent frames; 32x32 per camera, two cameras side by side.
    assert ep0["latents"].shape == (8, 10, 2, 4) and ep0["latents"].dtype == torch.bfloat16
    assert ep0["frame_index"].tolist() == list(range(37))
    texts = load_file(str(cache / "cache" / "text.safetensors"))
    assert set(texts) == {"task_0", "task_1", "empty"} and texts["task_0"].shape[1] == 16
    assert texts["task_0"].shape[0] == 4 and texts["empty"].shape[0] == 0  # WordLevel adds no EOS
    argv = [str(DATASET), "--base-model-path", str(cache / "base"), "--model-name", "lingbot_va_tiny",
            f"data.latent_cache={cache / 'cache'}", "--device", "cpu", "--dtype", "float32"]
    from embodied_core.cli.main import main as embodied_main

    assert embodied_main(["data", "precompute-latents", *argv]) == 0  # the `embodied data` sub-command
    assert "encoded 0 episode(s), skipped 4" in capsys.readouterr().out
    assert precompute_main([*argv[:-4], "data.video_stride=2"]) == 1  # other settings than the cache: refused


def test_strategy_windows_and_model_batch(cache):
    config = load_config(**{k: v for k, v in _config(cache).items()})
    dataset = load_factory(groups.DATASET_FORMATS, "lerobot_datasets")(config.training, config.data)
    transforms = make_transforms(config.model, config.data, stats=dataset.stats)
    by_episode = {}
    for position in range(len(dataset)):
        sample = dataset[position]
        by_episode.setdefault(int(sample["episode_index"]), []).append(sample)
    first = by_episode[0][0]
    assert first["latents"].shape == (8, 3, 2, 4)
    assert first["action"].shape == (12, 4)
    assert first["action_is_pad"][:4].all() and not first["action_is_pad"][4:].any()
    # Frame 5 of episode 0 trains on the window starting at latent frame 1 (frames 4..7 share it): its latent
    # frames 1..3 of the episode, and for window frames 1, 2 the actions of episode rows 4..7 and 8..11.
    import pyarrow.parquet as pq
    from safetensors.torch import load_file

    raw = torch.tensor(pq.read_table(DATASET / "data/chunk-000/episode_000000.parquet")["action"].to_pylist())
    frame5 = by_episode[0][5]
    assert torch.equal(frame5["action"][4:], raw[4:12])
    latents = load_file(str(episode_file(cache / "cache", 0)))["latents"].float()
    assert torch.equal(frame5["latents"], latents[:, 1:4]) and torch.equal(by_episode[0][4]["latents"], latents[:, 1:4])
    # Near the end the window is clamped to the last 3 latent frames.
    assert torch.equal(by_episode[0][-1]["latents"], latents[:, -3:])
    short = by_episode[2][0]  # 5 frames -> 2 latent frames < 3: last frame repeated, its actions padded
    assert torch.equal(short["latents"][:, 2], short["latents"][:, 1]) and short["action_is_pad"][8:].all()
    prepared = transforms.collate_fn([transforms.sample_transform(by_episode[1][0]),
                                      transforms.sample_transform(short)])
    assert prepared["actions"].shape == (2, 8, 3, 4, 1) and prepared["text_emb"].shape == (2, 32, 16)
    mask = prepared["actions_mask"]
    assert not mask[:, 4:].any() and mask[0, :4, 1:].all() and not mask[:, :, 0].any()
    assert prepared["actions"].abs().max() < 5  # quantile-normalized


def test_strategy_errors_name_the_fix(cache, tmp_path):
    config = load_config(**_config(cache))
    config.data.latent_cache = str(tmp_path / "nothing")
    with pytest.raises(DataError, match="precompute-latents"):
        load_factory(groups.DATASET_FORMATS, "lerobot_datasets")(config.training, config.data)


@pytest.mark.timeout(300)
def test_trainer_forward_backward_and_exact_resume(cache, tmp_path):
    out = tmp_path / "run"
    # An LR the updates visibly move the loss with (the default 2000-step warmup keeps steps 1-4 near zero).
    lr = {"lr_base": 1e-3, "lr_warmup_iters": 0}
    config = _config(cache, train_iters=4, save_interval=2, log_interval=1, output_dir=str(out), **lr)
    Trainer({**config, "model": {"export_transformer": True}}).train()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    assert len(losses) == 4 and all(torch.isfinite(torch.tensor(losses)))
    assert {"latent_loss", "action_loss"} <= set(rows[-1])
    from embodied_models.lingbot_va.transformer import LingBotVATransformer

    exported = LingBotVATransformer.from_pretrained(str(out / "checkpoints" / "step_4" / "transformer"))
    assert exported.config.num_layers == 2
    resumed = tmp_path / "resumed"
    import shutil

    shutil.copytree(out / "checkpoints" / "step_2", resumed / "checkpoints" / "step_2")
    Trainer(_config(cache, train_iters=4, save_interval=2, log_interval=1, output_dir=str(resumed),
                    resume_from=str(resumed / "checkpoints" / "step_2"), **lr)).train()
    again = [json.loads(line) for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in again if "loss" in r][-2:] == losses[-2:]
    # model.resume_optimizer=rebuild: same weights, step, LR and draws; fresh AdamW moments change step 4.
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(out / "checkpoints" / "step_2", rebuilt / "checkpoints" / "step_2")
    config = _config(cache, train_iters=4, save_interval=0, log_interval=1, output_dir=str(rebuilt),
                     resume_from=str(rebuilt / "checkpoints" / "step_2"), **lr)
    Trainer({**config, "model": {"resume_optimizer": "rebuild"}}).train()
    rows = {r["step"]: r for r in map(json.loads, (rebuilt / "metrics.jsonl").read_text().splitlines()) if "loss" in r}
    assert rows[3]["loss"] == losses[2] and rows[3]["lr"] == [r["lr"] for r in again if "lr" in r][-2]
    assert rows[4]["loss"] != losses[3]


def test_robotwin_tshape_tiling(cache):
    """T layout: the two half-size wrist latents side by side on top of the head latent."""
    from safetensors.torch import load_file

    data = {"latent_cache": str(cache / "tshape"), "camera_layout": "robotwin_tshape",
            "camera_keys": ["observation.images.front", "observation.images.wrist", "observation.images.front"]}
    config = load_config(training={"model_name": "lingbot_va_tiny"}, data=data)
    assert config.data.latent_hw() == (3, 2)
    precompute_latents(DATASET, base_model_path=cache / "base", data_config=config.data, episodes=[2],
                       device="cpu", dtype=torch.float32)
    tiled = load_file(str(episode_file(cache / "tshape", 2)))["latents"]
    assert tiled.shape == (8, 2, 3, 2)
    side = load_file(str(episode_file(cache / "cache", 2)))["latents"]  # width_concat: [front | wrist] at 32x32
    torch.testing.assert_close(tiled[:, :, 1:], side[:, :, :, :2])  # the head (front) at full size, bottom rows


def test_streaming_vae_encoder_matches_whole_clip_encoding(cache):
    """Observations encoded chunk by chunk (1, then 4, then 8 frames) give the cache's whole-episode latents."""
    from diffusers import AutoencoderKLWan
    from safetensors.torch import load_file

    from embodied_data.video.backends import make_backend
    from embodied_models.lingbot_va.vae import StreamingVAEEncoder

    config = load_config(training={"model_name": "lingbot_va_tiny"}, data={"latent_cache": str(cache / "cache")})
    vae = AutoencoderKLWan.from_pretrained(str(cache / "base" / "vae")).eval()
    backend = make_backend("pyav")
    videos = [backend.decode(DATASET / f"videos/chunk-000/{cam}/episode_000000.mp4",
                             [i / 30 for i in range(13)]).frames for cam in config.data.camera_keys]
    encoder = StreamingVAEEncoder(vae, config.data)
    chunks = [encoder([v[a:b] for v in videos]) for a, b in ((0, 1), (1, 5), (5, 13))]
    streamed = torch.cat(chunks, dim=2)[0]
    cached = load_file(str(episode_file(cache / "cache", 0)))["latents"].float()[:, :4]
    torch.testing.assert_close(streamed.bfloat16().float(), cached, atol=0.02, rtol=0.02)  # cache holds bf16
