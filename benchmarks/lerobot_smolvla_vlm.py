"""A local SmolVLM2 folder at the sizes of one of our SmolVLA presets, for lerobot's SmolVLA without the hub.

lerobot 0.6.1's ``SmolVLAPolicy`` reads its VLM backbone by name (``policy.vlm_model_name``): ``AutoConfig``,
``AutoProcessor`` (the processor's tokenizer gives the image special-token ids) and, in its preprocessor,
``AutoTokenizer``. With ``policy.load_vlm_weights=false`` it builds ``SmolVLMForConditionalGeneration(config)`` with
random weights, so a folder with a config, a tokenizer and a processor config is all it needs. This script writes
that folder from our preset's YAML (``packages/embodied-models/.../smolvla/<preset>.yaml``):

- ``config.json``: a ``SmolVLMConfig`` (vision encoder, Llama text decoder, pixel-shuffle factor) at the preset's
  sizes, the vision image size being ``data.image_size``;
- a byte-level tokenizer whose ids are those of our built-in ``tiny`` tokenizer (0 pad, 1 eos, 2 bos prepended to
  every text, 3..258 the UTF-8 bytes, 259 ``<fake_token_around_image>``, 260 ``<global-img>``), plus ``<image>``,
  ``<end_of_utterance>`` and ``<video>`` at 261-263 for SmolVLM's processor (never produced from text); so a task
  tokenizes to the same ids on both sides;
- the SmolVLM processor's files (image and video processor configs).

Runs in the lerobot side venv (its transformers is the one lerobot uses); prints the folder and the ids of a probe
text as JSON::

    .venv-lerobot/bin/python benchmarks/lerobot_smolvla_vlm.py OUT_DIR [--preset smolvla_tiny]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PRESETS = REPO / "packages" / "embodied-models" / "src" / "embodied_models" / "smolvla"

PAD, EOS, BOS, BYTE_BASE = 0, 1, 2, 3
SPECIALS = {"<pad>": PAD, "</s>": EOS, "<s>": BOS, "<fake_token_around_image>": BYTE_BASE + 256,
            "<global-img>": BYTE_BASE + 257, "<image>": BYTE_BASE + 258, "<end_of_utterance>": BYTE_BASE + 259,
            "<video>": BYTE_BASE + 260}
VOCAB_SIZE = BYTE_BASE + 261


def byte_chars() -> list[str]:
    """The printable stand-in character of each byte 0..255 in the byte-level pre-tokenizer's alphabet (printable
    Latin-1 bytes stand for themselves, the others for code points from 256 up, in byte order)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), 256)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def read_preset(name: str) -> dict[str, Any]:
    """The ``model:`` / ``data:`` sections of our preset YAML (read as data)."""
    import yaml

    path = PRESETS / f"{name}.yaml"
    if not path.is_file():
        raise SystemExit(f"--preset {name}: no {path} (presets: "
                         f"{', '.join(sorted(p.stem for p in PRESETS.glob('*.yaml')))})")
    with path.open() as handle:
        return yaml.safe_load(handle)


def write_tokenizer(out: Path) -> Any:
    """Byte-level BPE without merges: one token per UTF-8 byte, BOS prepended; saved with the special tokens that
    SmolVLM's processor reads as tokenizer attributes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = dict(SPECIALS)
    vocab.update({char: BYTE_BASE + b for b, char in enumerate(byte_chars())})
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                        special_tokens=[("<s>", BOS)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        extra_special_tokens={"fake_image_token": "<fake_token_around_image>", "global_image_token": "<global-img>",
                              "image_token": "<image>", "end_of_utterance_token": "<end_of_utterance>",
                              "video_token": "<video>"},
        model_max_length=4096)
    tokenizer.save_pretrained(str(out))
    return tokenizer


def write_folder(out: Path, preset: str) -> dict[str, Any]:
    """Writes config, tokenizer and processor files; returns a summary."""
    from transformers import AutoProcessor, AutoTokenizer, SmolVLMConfig
    from transformers.models.smolvlm import SmolVLMImageProcessor, SmolVLMProcessor, SmolVLMVideoProcessor

    sections = read_preset(preset)
    model, data = sections["model"], sections["data"]
    if model.get("tokenizer") != "tiny":
        raise SystemExit(f"--preset {preset}: uses model.tokenizer={model.get('tokenizer')!r}; this folder carries "
                         "the tiny byte tokenizer only")
    if int(model["vocab_size"]) < VOCAB_SIZE:
        raise SystemExit(f"--preset {preset}: model.vocab_size {model['vocab_size']} < {VOCAB_SIZE} token ids here")
    image = int(data["image_size"][0])
    config = SmolVLMConfig(
        vision_config={"hidden_size": model["vision_width"], "intermediate_size": model["vision_mlp_dim"],
                       "num_hidden_layers": model["vision_depth"], "num_attention_heads": model["vision_num_heads"],
                       "num_channels": 3, "image_size": image, "patch_size": model["vision_patch_size"],
                       "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": model.get("layer_norm_eps", 1e-6)},
        text_config={"model_type": "llama", "vocab_size": model["vocab_size"], "hidden_size": model["vlm_width"],
                     "intermediate_size": model["vlm_mlp_dim"], "num_hidden_layers": model["num_vlm_layers"],
                     "num_attention_heads": model["num_heads"], "num_key_value_heads": model["num_kv_heads"],
                     "head_dim": model["head_dim"], "rms_norm_eps": model.get("rms_norm_eps", 1e-5),
                     "hidden_act": "silu", "rope_theta": model.get("rope_theta", 10000.0),
                     "max_position_embeddings": 512, "attention_bias": False, "mlp_bias": False,
                     "tie_word_embeddings": False, "pad_token_id": model["pad_token_id"]},
        scale_factor=model["scale_factor"], image_token_id=SPECIALS["<image>"], tie_word_embeddings=False,
        pad_token_id=model["pad_token_id"])
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(str(out))
    tokenizer = write_tokenizer(out)
    grid = image // int(model["vision_patch_size"])
    seq_len = grid * grid // int(model["scale_factor"]) ** 2
    size = {"longest_edge": image}
    processor = SmolVLMProcessor(
        image_processor=SmolVLMImageProcessor(size=size, max_image_size=size, do_image_splitting=False),
        tokenizer=tokenizer, video_processor=SmolVLMVideoProcessor(size=size, max_image_size=size),
        image_seq_len=seq_len)
    processor.save_pretrained(str(out))
    # Read back the way lerobot does, so a folder that lerobot cannot use fails here.
    loaded = AutoProcessor.from_pretrained(str(out))
    probe = "Press a button from the top\n"
    ids = AutoTokenizer.from_pretrained(str(out))(probe)["input_ids"]
    expected = [BOS, *(BYTE_BASE + b for b in probe.encode("utf-8"))]
    if ids != expected:
        raise SystemExit(f"tokenizer in {out} gives {ids[:8]}..., not the byte ids {expected[:8]}...")
    return {"folder": str(out), "preset": preset, "image_size": image, "image_seq_len": seq_len,
            "fake_image_token_id": loaded.tokenizer.fake_image_token_id,
            "global_image_token_id": loaded.tokenizer.global_image_token_id, "probe_ids": ids}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write (created)")
    parser.add_argument("--preset", default="smolvla_tiny", help="our SmolVLA preset whose sizes to use")
    opts = parser.parse_args(argv)
    print(json.dumps(write_folder(opts.out, opts.preset)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
