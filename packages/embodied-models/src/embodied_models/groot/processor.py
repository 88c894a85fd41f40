"""What the GR00T prompt processors (N1.6's Eagle3, N1.7's Qwen3-VL) do the same way.

- :func:`byte_level_tokenizer`: the built-in tiny processors' tokenizer (ids 0..255 are the byte-level alphabet,
  then the port's special tokens; no merges) with the port's chat template;
- :func:`padding_id`: the pad id (the tokenizer's, else ``<|endoftext|>``);
- :func:`statistics_problems`: the folder's pixel statistics and vocabulary against the model section;
- :func:`pick_processor`: a folder when one is given, else the built-in tiny processor of ``model.processor=tiny``.

What only looks alike stays in the ports: the chat-template search order (Eagle's ``chat_template.json`` first, as
LoongForge's build_processor; Qwen3-VL's tokenizer template first), the image-span layout and the image settings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

from embodied_core.errors import ConfigError

__all__ = ["byte_level_tokenizer", "padding_id", "pick_processor", "statistics_problems"]

P = TypeVar("P")


def byte_level_tokenizer(specials: Sequence[str], chat_template: str) -> Any:
    """A transformers fast tokenizer: byte-level BPE without merges over the 256-symbol alphabet, then ``specials``
    (``<|im_end|>`` is eos, ``<|endoftext|>`` pads), with ``chat_template``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: i for i, symbol in enumerate(alphabet)}
    for token in specials:
        vocab[token] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(list(specials))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = chat_template
    return tokenizer


def padding_id(tokenizer: Any) -> int:
    """The id prompts are left-padded with: the tokenizer's pad token, else ``<|endoftext|>``."""
    pad = tokenizer.pad_token_id
    return int(pad if pad is not None else tokenizer.convert_tokens_to_ids("<|endoftext|>"))


def statistics_problems(source: str, settings: dict[str, Any], *, image_mean: list[float], image_std: list[float],
                        processor_vocab: int, vocab_size: int) -> list[str]:
    """Problems between a processor's ``image_mean`` / ``image_std`` (3 values each) and tokenizer size and the
    model section's ``model.image_mean`` / ``model.image_std`` / ``model.vocab_size`` (empty when they agree)."""
    problems = []
    for name, ours in (("image_mean", image_mean), ("image_std", image_std)):
        theirs = settings[name]
        if len(theirs) != 3 or not all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(theirs, ours, strict=True)):
            problems.append(f"processor {source}: {name} {theirs} but model.{name} is {list(ours)}")
    if processor_vocab > vocab_size:
        problems.append(f"processor {source}: the tokenizer has {processor_vocab} ids but model.vocab_size is "
                        f"{vocab_size}")
    return problems


def pick_processor(cls: type[P], kind: str, path: str | None, *, needs_folder: str) -> P:
    """``cls.from_folder(path)`` when a folder is given, else ``cls.tiny()`` for ``model.processor=tiny``.

    Raises:
        ConfigError: ``needs_folder`` (the port's message naming --tokenizer-path) for another kind without a
            folder, or the folder's own errors.
    """
    if path:
        return cls.from_folder(path)  # type: ignore[attr-defined]
    if kind == "tiny":
        return cls.tiny()  # type: ignore[attr-defined]
    raise ConfigError([needs_folder])
