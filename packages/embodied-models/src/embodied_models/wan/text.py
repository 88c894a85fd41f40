"""UMT5 text encoding of the Wan family: prompt cleaning, a local encoder + tokenizer, a tiny random UMT5.

Wan2.2 conditions on the last hidden state of UMT5-XXL (``text_dim`` 4096) for prompts tokenized to a fixed
``text_len`` (512 in Wan; 8..512 in derivatives). :func:`encode_prompts` returns that state with the rows past
each prompt's length set to zero, plus the tokenizer's attention mask. Everything loads from local folders
(a diffusers-style ``text_encoder/`` and ``tokenizer/``); nothing goes to a model hub.
"""

from __future__ import annotations

import html
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from embodied_core.errors import UsageError

__all__ = ["TINY_UMT5_CONFIG", "UMT5TextEncoder", "build_tiny_umt5", "clean_prompt", "encode_prompts"]

TINY_UMT5_CONFIG: dict[str, Any] = {"d_model": 16, "d_kv": 8, "d_ff": 32, "num_layers": 1, "num_heads": 2,
                                    "relative_attention_num_buckets": 8}
"""A 1-layer UMT5 of width 16 (the vocabulary size comes from the tokenizer), for tests."""


def clean_prompt(text: str) -> str:
    """Wan's prompt cleaning: ``ftfy.fix_text`` (mojibake, odd quotes), HTML-unescape twice, collapse whitespace."""
    import ftfy

    return re.sub(r"\s+", " ", html.unescape(html.unescape(ftfy.fix_text(text))).strip()).strip()


def _require_folder(path: Path, what: str) -> Path:
    if not path.is_dir() or not any(path.glob("*.json")):
        raise UsageError(f"{path}: not a {what} folder (no *.json inside); expected the {path.name}/ folder of a "
                         "Wan2.2 diffusers model (e.g. Wan2.2-TI2V-5B-Diffusers)")
    return path


@torch.no_grad()
def encode_prompts(tokenizer: Any, encoder: Any, prompts: Sequence[str], *, text_len: int,
                   clean: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts -> (last hidden state [N, text_len, D] zero past each prompt's tokens, attention mask [N, L] bool).

    Runs on the encoder's device and dtype; the hidden state comes back in that dtype on that device.
    """
    param = next(encoder.parameters())
    texts = [clean_prompt(p) if clean else p for p in prompts]
    tokens = tokenizer(texts, padding="max_length", max_length=text_len, truncation=True, add_special_tokens=True,
                       return_attention_mask=True, return_tensors="pt")
    mask = tokens.attention_mask.to(param.device)
    hidden = encoder(tokens.input_ids.to(param.device), attention_mask=mask).last_hidden_state
    return hidden * mask[..., None].to(hidden.dtype), mask.bool()


@attrs.define
class UMT5TextEncoder:
    """A UMT5 encoder and its tokenizer loaded from local folders (eval mode, frozen).

    Attributes:
        tokenizer: the transformers tokenizer.
        encoder: ``UMT5EncoderModel``.
    """

    tokenizer: Any
    encoder: Any

    @classmethod
    def from_folders(cls, text_encoder: str | Path, tokenizer: str | Path, *, dtype: torch.dtype = torch.float32,
                     device: str | torch.device = "cpu") -> UMT5TextEncoder:
        """Loads ``UMT5EncoderModel`` from ``text_encoder`` and the tokenizer from ``tokenizer``."""
        from transformers import AutoTokenizer, UMT5EncoderModel

        tok = AutoTokenizer.from_pretrained(str(_require_folder(Path(tokenizer), "tokenizer")))
        enc = UMT5EncoderModel.from_pretrained(str(_require_folder(Path(text_encoder), "UMT5 text encoder")),
                                               torch_dtype=dtype)
        return cls(tokenizer=tok, encoder=enc.to(device).eval().requires_grad_(False))

    @classmethod
    def from_base(cls, base: str | Path, **kwargs: Any) -> UMT5TextEncoder:
        """Loads ``<base>/text_encoder`` and ``<base>/tokenizer`` (a Wan2.2 diffusers layout)."""
        return cls.from_folders(Path(base) / "text_encoder", Path(base) / "tokenizer", **kwargs)

    @property
    def text_dim(self) -> int:
        """Width of the hidden state."""
        return int(self.encoder.config.d_model)

    def __call__(self, prompts: Sequence[str], *, text_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """See :func:`encode_prompts`."""
        return encode_prompts(self.tokenizer, self.encoder, prompts, text_len=text_len)


def build_tiny_umt5(folder: str | Path, tokenizer_dir: str | Path, *, seed: int = 0) -> Path:
    """Writes a random :data:`TINY_UMT5_CONFIG` UMT5 to ``<folder>/text_encoder`` and copies the tokenizer files of
    ``tokenizer_dir`` to ``<folder>/tokenizer`` (the vocabulary size follows the tokenizer); returns ``folder``."""
    from transformers import AutoTokenizer, UMT5Config, UMT5EncoderModel

    out = Path(folder)
    shutil.copytree(_require_folder(Path(tokenizer_dir), "tokenizer"), out / "tokenizer", dirs_exist_ok=True)
    vocab = len(AutoTokenizer.from_pretrained(str(out / "tokenizer")))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = UMT5EncoderModel(UMT5Config(vocab_size=vocab, **TINY_UMT5_CONFIG))
    model.save_pretrained(str(out / "text_encoder"))
    return out
