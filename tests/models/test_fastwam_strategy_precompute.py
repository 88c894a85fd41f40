"""``embodied data precompute-text`` end to end with a tiny random UMT5 (and the shared umt5_tiny tokenizer):
v3.0 tasks.parquet and v2.1 tasks.jsonl prompts, the entry payload, resume (valid entries skipped, a broken one
re-encoded), two ranks (RANK / WORLD_SIZE as torchrun sets them), and the fastwam strategy + collator reading the
cache it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from embodied_core.cli.main import main as embodied_main
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.strategies.base import make_strategy
from embodied_models.fastwam.data.config import FastWAMDataConfig
from embodied_models.fastwam.data.prompts import cache_file_name, format_prompt
from embodied_models.fastwam.data.transforms import make_transforms
from tests.support import DATASETS_DIR

ROOT = DATASETS_DIR / "strategies"
V21, V30 = ROOT / "fastwam_v21", ROOT / "fastwam_v30"
TOKENIZER = ROOT / "tokenizers" / "umt5_tiny"
TEXT_LEN, TEXT_DIM, ENCODER_ID = 24, 16, "tinyumt5"
PROMPTS = [format_prompt(t) for t in ("pick the red cube", "stack the blue block",
                                      "A video recorded from above: wipe the table")]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> Path:
    """A Wan-style base folder: a tiny random UMT5 in text_encoder/ and the umt5_tiny tokenizer in tokenizer/."""
    from embodied_models.wan.text import TINY_UMT5_CONFIG, build_tiny_umt5

    assert TINY_UMT5_CONFIG["d_model"] == TEXT_DIM
    return build_tiny_umt5(tmp_path_factory.mktemp("umt5") / "base", TOKENIZER)


def _argv(dataset: Path, encoder: Path, out: Path) -> list[str]:
    return ["data", "precompute-text", str(dataset), "--text-encoder-path", str(encoder), "--out", str(out),
            "--text-len", str(TEXT_LEN), "--encoder-id", ENCODER_ID, "--dtype", "float32", "--device", "cpu"]


def test_precompute_v30_payload_and_resume(encoder, tmp_path, capsys):
    from transformers import AutoTokenizer, UMT5EncoderModel

    out = tmp_path / "cache"
    assert embodied_main(_argv(V30, encoder, out)) == 0  # v3.0: the prompts come from meta/tasks.parquet
    assert "encoded 3 prompt(s), skipped 0" in capsys.readouterr().out
    files = {p: out / cache_file_name(p, text_len=TEXT_LEN, encoder_id=ENCODER_ID) for p in PROMPTS}
    assert all(f.is_file() for f in files.values())
    tokenizer = AutoTokenizer.from_pretrained(str(encoder / "tokenizer"))
    model = UMT5EncoderModel.from_pretrained(str(encoder / "text_encoder")).eval()
    for prompt, path in files.items():
        payload = torch.load(path, weights_only=True)
        tokens = tokenizer([prompt], padding="max_length", max_length=TEXT_LEN, truncation=True, return_tensors="pt")
        with torch.no_grad():
            hidden = model(tokens.input_ids, attention_mask=tokens.attention_mask).last_hidden_state[0]
        mask = tokens.attention_mask[0].bool()
        assert payload["prompt"] == prompt and payload["text_len"] == TEXT_LEN and payload["encoder_id"] == ENCODER_ID
        assert torch.equal(payload["input_ids"], tokens.input_ids[0]) and torch.equal(payload["mask"], mask)
        assert payload["context"].dtype == torch.float32 and payload["context"].shape == (TEXT_LEN, TEXT_DIM)
        assert torch.allclose(payload["context"][mask], hidden[mask]) and not payload["context"][~mask].any()
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporary files
    assert set(json.loads((out / "INDEX.json").read_text())) == set(PROMPTS)
    assert not torch.load(files[PROMPTS[2]], weights_only=True)["mask"].all()  # the short prompt has padding
    # resume: valid entries are skipped; a truncated one is re-encoded
    stamp = files[PROMPTS[0]].stat().st_mtime_ns
    files[PROMPTS[1]].write_bytes(files[PROMPTS[1]].read_bytes()[:40])
    assert embodied_main(_argv(V30, encoder, out)) == 0
    assert "encoded 1 prompt(s), skipped 2" in capsys.readouterr().out
    assert files[PROMPTS[0]].stat().st_mtime_ns == stamp
    assert torch.load(files[PROMPTS[1]], weights_only=True)["prompt"] == PROMPTS[1]


def test_two_ranks_by_environment_then_the_strategy_reads_the_cache(encoder, tmp_path, monkeypatch, capsys):
    out = tmp_path / "cache"
    # what torchrun sets (no process group is needed): each rank encodes its share, rank 0 writes INDEX.json
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank, count in ((1, 1), (0, 2)):
        monkeypatch.setenv("RANK", str(rank))
        assert embodied_main(_argv(V21, encoder, out)) == 0  # v2.1: prompts from meta/tasks.jsonl
        assert f"rank {rank}/2: encoded {count} prompt(s), skipped 0" in capsys.readouterr().out
    # the cache serves the strategy (checked before any data is read) and the collator
    config = FastWAMDataConfig(num_video_frames=5, action_video_freq_ratio=2, image_size=(16, 16), action_horizon=8,
                               text_len=TEXT_LEN, text_dim=TEXT_DIM, encoder_id=ENCODER_ID, text_cache_dir=str(out))
    make_strategy("fastwam").plan(LeRobotMeta.load(V21), config)
    stats = {k: {"q01": torch.zeros(w).numpy(), "q99": torch.ones(w).numpy()}
             for k, w in (("action", 7), ("observation.state", 8))}
    collate = make_transforms(None, config, stats=stats).collate_fn
    samples = [{"video": torch.zeros(3, 5, 16, 32), "proprio": torch.zeros(1, 8), "prompt": p} for p in PROMPTS]
    batch = collate(samples)
    assert batch["context"].shape == (3, TEXT_LEN, TEXT_DIM) and batch["context_mask"].sum(1).tolist()[2] < TEXT_LEN
    for i, prompt in enumerate(PROMPTS):
        entry = torch.load(out / cache_file_name(prompt, text_len=TEXT_LEN, encoder_id=ENCODER_ID), weights_only=True)
        assert torch.equal(batch["context"][i], entry["context"]) and torch.equal(batch["context_mask"][i],
                                                                                  entry["mask"])


def test_usage_errors_exit_2_without_traceback(encoder, tmp_path, capsys):
    assert embodied_main(["data", "precompute-text", str(V21), "--text-encoder-path", str(tmp_path / "none"),
                          "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "--text-encoder-path" in err and "Traceback" not in err
    assert embodied_main([*_argv(V21, encoder, tmp_path / "c")[:-4], "--encoder-id", "Wan-2"]) == 2
    assert "--encoder-id 'Wan-2'" in capsys.readouterr().err
