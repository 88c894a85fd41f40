"""The Qwen3-VL prompt processing GR00T N1.7 uses, from a local processor folder or the built-in tiny one.

What Isaac-GR00T's ``Gr00tN1d7Processor`` does with the Qwen3-VL processor, split so that images cross the
DataLoader as uint8: each sample is one user turn holding every view (as an image entry) and then the instruction,
rendered with the folder's chat template (``add_generation_prompt=False``); every image placeholder
(``<|image_pad|>``) is expanded to one token per merged patch (``(H / patch) (W / patch) / merge^2``, as
``Qwen3VLProcessor`` does) and the text is tokenized; batches are left-padded with the pad token. The pixel side
(rescale, normalize with the folder's image_mean / image_std, patchify) runs in the model
(:meth:`~embodied_models.groot_n1_7.backbone.GrootBackbone.pixel_values`), from the same settings.

The folder is what ``AutoTokenizer`` reads (``tokenizer.json`` / ``tokenizer_config.json``, a chat template in the
tokenizer config, ``chat_template.jinja`` or ``chat_template.json``) plus ``preprocessor_config.json`` read by
transformers' ``Qwen2VLImageProcessorPil``. The ``tiny`` processor is a byte-level BPE tokenizer without merges,
the Qwen special tokens and a Qwen-style chat template, built in code (ids: 256 bytes, then the specials); it can be
written to a folder with :meth:`VLProcessor.save` and loads back as any other folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from embodied_core.errors import ConfigError
from embodied_models.groot.processor import byte_level_tokenizer, padding_id, pick_processor, statistics_problems

__all__ = ["IMAGE_TOKEN", "TINY_CHAT_TEMPLATE", "VLProcessor", "check_compatible", "load_processor"]

IMAGE_TOKEN = "<|image_pad|>"
_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", IMAGE_TOKEN,
             "<|video_pad|>")
TINY_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")
"""The tiny processor's chat template: Qwen's turn layout, one vision block per image entry."""

TINY_IMAGE_SETTINGS: dict[str, Any] = {"patch_size": 8, "merge_size": 2, "temporal_patch_size": 2,
                                       "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                                       "size": {"shortest_edge": 16 * 16, "longest_edge": 1024 * 1024}}
"""Image settings of the tiny processor (groot_n1_7_tiny's vision patch is 8 px)."""


def _tiny_tokenizer() -> Any:
    return byte_level_tokenizer(_SPECIALS, TINY_CHAT_TEMPLATE)


def _read_chat_template(folder: Path, tokenizer: Any) -> str | None:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.chat_template
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    as_json = folder / "chat_template.json"
    if as_json.is_file():
        doc = json.loads(as_json.read_text())
        template = doc.get("chat_template") if isinstance(doc, dict) else None
        return template if isinstance(template, str) else None
    return None


class VLProcessor:
    """Chat template + tokenizer + image settings of a Qwen3-VL processor (picklable: runs in workers).

    Args:
        tokenizer: a transformers tokenizer with the image placeholder token.
        chat_template: the Jinja chat template.
        image_settings: ``patch_size``, ``merge_size``, ``temporal_patch_size``, ``image_mean``, ``image_std`` and
            ``size`` (``shortest_edge`` / ``longest_edge`` pixel bounds of the processor's smart resize).
        source: the folder (or ``"tiny"``), named in messages and recorded in policies.
    """

    def __init__(self, tokenizer: Any, chat_template: str, image_settings: dict[str, Any], *, source: str) -> None:
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.image_settings = dict(image_settings)
        self.source = source
        self.image_token_id = int(tokenizer.convert_tokens_to_ids(IMAGE_TOKEN))
        if self.image_token_id is None or self.image_token_id == tokenizer.unk_token_id:
            raise ConfigError([f"processor {source}: the tokenizer has no {IMAGE_TOKEN} token (not a Qwen3-VL "
                               "tokenizer)"])
        self.pad_token_id = padding_id(tokenizer)
        self.vocab_size = len(tokenizer)

    @classmethod
    def tiny(cls) -> VLProcessor:
        """The built-in tiny processor (no files)."""
        return cls(_tiny_tokenizer(), TINY_CHAT_TEMPLATE, TINY_IMAGE_SETTINGS, source="tiny")

    @classmethod
    def from_folder(cls, path: str | Path) -> VLProcessor:
        """Reads a local processor folder (see the module docstring); ConfigError naming what is wrong."""
        folder = Path(path).expanduser()
        where = f"--tokenizer-path {folder}"
        if not folder.is_dir():
            raise ConfigError([f"{where}: not a directory (GR00T N1.7 needs a local Qwen3-VL processor folder, "
                               "e.g. a download of nvidia/Cosmos-Reason2-2B)"])
        if not (folder / "preprocessor_config.json").is_file():
            raise ConfigError([f"{where}: no preprocessor_config.json (the Qwen3-VL image settings: patch_size, "
                               "merge_size, image_mean, image_std)"])
        from transformers import AutoTokenizer
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
            image_processor = Qwen2VLImageProcessorPil.from_pretrained(str(folder), local_files_only=True)
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError([f"{where}: cannot load the tokenizer / image processor: {exc}"]) from None
        template = _read_chat_template(folder, tokenizer)
        if not template:
            raise ConfigError([f"{where}: no chat template (tokenizer_config.json 'chat_template', "
                               "chat_template.jinja or chat_template.json)"])
        size = image_processor.size
        settings = {"patch_size": int(image_processor.patch_size), "merge_size": int(image_processor.merge_size),
                    "temporal_patch_size": int(image_processor.temporal_patch_size),
                    "image_mean": [float(v) for v in image_processor.image_mean],
                    "image_std": [float(v) for v in image_processor.image_std],
                    "size": {"shortest_edge": int(size["shortest_edge"]), "longest_edge": int(size["longest_edge"])}}
        return cls(tokenizer, template, settings, source=str(folder.resolve()))

    def save(self, folder: str | Path) -> Path:
        """Writes the tokenizer, the chat template and ``preprocessor_config.json`` (a folder from_folder reads)."""
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        self.tokenizer.save_pretrained(str(out))
        (out / "chat_template.jinja").write_text(self.chat_template)
        settings = dict(self.image_settings)
        Qwen2VLImageProcessorPil(**settings).save_pretrained(str(out))
        return out

    # ------------------------------------------------------------------ prompts
    def tokens_per_image(self, height: int, width: int) -> int:
        """Image placeholder tokens of one view of ``height`` x ``width`` pixels."""
        patch, merge = self.image_settings["patch_size"], self.image_settings["merge_size"]
        return (height // patch) * (width // patch) // (merge * merge)

    def resized_size(self, height: int, width: int) -> tuple[int, int]:
        """The size the processor's smart resize would give a view (GR00T feeds views that need none)."""
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

        size = self.image_settings["size"]
        factor = self.image_settings["patch_size"] * self.image_settings["merge_size"]
        return smart_resize(height, width, factor=factor, min_pixels=size["shortest_edge"],
                            max_pixels=size["longest_edge"])

    def render(self, text: str, num_images: int) -> str:
        """The chat-template text of one user turn: ``num_images`` image entries, then ``text``."""
        content: list[dict[str, Any]] = [{"type": "image"} for _ in range(num_images)]
        content.append({"type": "text", "text": text})
        return self.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                  add_generation_prompt=False, chat_template=self.chat_template)

    def prompt_ids(self, text: str, *, num_images: int, tokens_per_image: int) -> list[int]:
        """Token ids of the prompt with every image placeholder expanded to ``tokens_per_image`` tokens."""
        rendered = self.render(text, num_images)
        parts = rendered.split(IMAGE_TOKEN)
        if len(parts) - 1 != num_images:
            raise ConfigError([f"processor {self.source}: its chat template rendered {len(parts) - 1} image "
                               f"placeholder(s) for {num_images} image(s)"])
        expanded = (IMAGE_TOKEN * tokens_per_image).join(parts)
        return list(self.tokenizer(expanded)["input_ids"])


def load_processor(kind: str, path: str | None) -> VLProcessor:
    """The processor of ``model.processor``: the folder when one is given, else the built-in tiny one.

    Raises:
        ConfigError: ``qwen3_vl`` without a folder, or a folder that cannot be read.
    """
    return pick_processor(VLProcessor, kind, path, needs_folder=(
        "GR00T N1.7 builds its prompt with the Qwen3-VL processor: pass --tokenizer-path DIR (a local "
        "Cosmos-Reason2-2B / Qwen3-VL folder) or data.tokenizer_path=DIR"))


def check_compatible(processor: VLProcessor, *, patch_size: int, merge_size: int, temporal_patch_size: int,
                     image_mean: list[float], image_std: list[float], vocab_size: int,
                     image_size: tuple[int, int]) -> list[str]:
    """Problems between the processor's settings and the model / data config (empty when they agree)."""
    s = processor.image_settings
    problems = []
    for name, ours in (("patch_size", patch_size), ("merge_size", merge_size),
                       ("temporal_patch_size", temporal_patch_size)):
        if int(s[name]) != ours:
            field = {"patch_size": "vision_patch_size", "merge_size": "vision_merge_size",
                     "temporal_patch_size": "vision_temporal_patch_size"}[name]
            problems.append(f"processor {processor.source}: {name} {s[name]} but model.{field} is {ours}")
    problems += statistics_problems(processor.source, s, image_mean=image_mean, image_std=image_std,
                                    processor_vocab=processor.vocab_size, vocab_size=vocab_size)
    resized = processor.resized_size(*image_size)
    if tuple(resized) != tuple(image_size):
        problems.append(f"data.image_size {tuple(image_size)}: the processor would resize such views to "
                        f"{tuple(resized)} (its pixel bounds {s['size']}); set data.image_size={list(resized)}")
    return problems
