"""GR00T N1.6's prompts: the Eagle3 chat template and image spans, from a local processor folder or built in (tiny).

As LoongForge's ``Eagle3VLProcessor`` (``data/datasets/groot_n1_6/transforms/eagle3_model/processing_eagle3_vl.py``)
builds them: one user turn ``[text, image, image, ...]`` goes through the chat template
(``add_generation_prompt=False``), which writes ``<image-k>`` for the k-th image; each ``<image-k>`` becomes
``<image k><img>`` + ``<IMG_CONTEXT>`` x n + ``</img>`` with n = H W / pixels_per_token (pixels_per_token =
(2 patch)^2 = 784 for the released patch 14), and the text is tokenized; batches are left-padded with the pad
token (the N1.6 collator sets ``padding_side = "left"``). The pixel side (rescale by 1/255, normalize with the
folder's ``image_mean`` / ``image_std``) runs in the model (``EagleBackbone.normalize``).

A folder is what ``AutoTokenizer`` reads plus its chat template (in the tokenizer config, ``chat_template.json`` or
``chat_template.jinja``), and optionally ``processor_config.json`` (``image_token``, ``image_start_token``,
``image_end_token``, ``pixels_per_token``) and ``preprocessor_config.json`` (``image_mean``, ``image_std``; the
processor class defaults, 0.5, when absent), e.g. a download of aravindhs-NV/eagle3-processor-groot-n1d6. No
Python code of the folder is ever run. The ``tiny`` processor is a byte-level BPE tokenizer without merges, the
specials, and a chat template with Eagle's layout, built in code; :meth:`EagleProcessor.save` writes it as a folder.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from embodied_core.errors import ConfigError
from embodied_models.groot.processor import byte_level_tokenizer, padding_id, pick_processor, statistics_problems

__all__ = ["TINY_CHAT_TEMPLATE", "EagleProcessor", "check_compatible", "load_processor"]

_PLACEHOLDER = re.compile(r"<image-(\d+)>")
DEFAULT_SETTINGS: dict[str, Any] = {"image_token": "<IMG_CONTEXT>", "image_start_token": "<img>",
                                    "image_end_token": "</img>", "pixels_per_token": 28 * 28,
                                    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
"""LoongForge's Eagle3VLProcessor / Eagle3VLImageProcessorFast defaults."""
_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>")
TINY_CHAT_TEMPLATE = (
    "{%- set images = namespace(count=0) -%}"
    "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.\\n<|im_end|>\\n' -}}{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{%- set images.count = images.count + 1 -%}"
    "{{- '<image-' ~ images.count ~ '>' -}}"
    "{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")
"""The tiny processor's chat template: Eagle's layout (a default system turn, ``<image-k>`` per image entry)."""
TINY_PIXELS_PER_TOKEN = 16 * 16
"""groot_n1_6_tiny's 8-pixel patches merged 2 x 2: one token per 16 x 16 pixels."""


def _tiny_tokenizer() -> Any:
    return byte_level_tokenizer(_SPECIALS, TINY_CHAT_TEMPLATE)


def _read_json(path: Path, where: str) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError([f"{where}: {path.name} is not readable JSON ({exc})"]) from None
    if not isinstance(doc, dict):
        raise ConfigError([f"{where}: {path.name} must hold a JSON object"])
    return doc


def _read_chat_template(folder: Path, tokenizer: Any, where: str) -> str | None:
    as_json = _read_json(folder / "chat_template.json", where).get("chat_template")
    if isinstance(as_json, str):
        return as_json  # what LoongForge's build_processor prefers
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.chat_template
    jinja = folder / "chat_template.jinja"
    return jinja.read_text() if jinja.is_file() else None


def _image_settings(folder: Path, where: str) -> dict[str, Any]:
    settings = dict(DEFAULT_SETTINGS)
    processor = _read_json(folder / "processor_config.json", where)
    settings.update({k: processor[k] for k in ("image_token", "image_start_token", "image_end_token",
                                               "pixels_per_token") if k in processor})
    image = _read_json(folder / "preprocessor_config.json", where)
    settings.update({k: [float(v) for v in image[k]] for k in ("image_mean", "image_std") if k in image})
    # the pixel path in the model rescales by 1/255 and normalizes; a folder asking for something else is refused
    expected = {"do_rescale": True, "do_normalize": True}
    odd = [f"{k}={image[k]!r}" for k, v in expected.items() if k in image and image[k] != v]
    if "rescale_factor" in image and not math.isclose(float(image["rescale_factor"]), 1 / 255, rel_tol=1e-6):
        odd.append(f"rescale_factor={image['rescale_factor']!r}")
    if odd:
        raise ConfigError([f"{where}: preprocessor_config.json sets {', '.join(odd)}; GR00T N1.6 rescales by 1/255 "
                           "and normalizes (Eagle3VLImageProcessorFast's defaults)"])
    return settings


class EagleProcessor:
    """Chat template + tokenizer + image-span settings of an Eagle3 processor (picklable: runs in workers).

    Args:
        tokenizer: a transformers tokenizer with the image tokens.
        chat_template: the Jinja chat template.
        settings: ``image_token``, ``image_start_token``, ``image_end_token``, ``pixels_per_token``,
            ``image_mean``, ``image_std`` (see :data:`DEFAULT_SETTINGS`).
        source: the folder (or ``"tiny"``), named in messages and recorded in policies.
    """

    def __init__(self, tokenizer: Any, chat_template: str, settings: dict[str, Any], *, source: str) -> None:
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.settings = dict(settings)
        self.source = source
        ids = {}
        for key in ("image_token", "image_start_token", "image_end_token"):
            token = self.settings[key]
            token_id = tokenizer.convert_tokens_to_ids(token)
            if token_id is None or token_id == tokenizer.unk_token_id:
                raise ConfigError([f"processor {source}: the tokenizer has no {token} token ({key}; not an Eagle3 "
                                   "tokenizer)"])
            ids[key] = int(token_id)
        self.image_token_id = ids["image_token"]
        self.pad_token_id = padding_id(tokenizer)
        self.vocab_size = len(tokenizer)

    @classmethod
    def tiny(cls) -> EagleProcessor:
        """The built-in tiny processor (no files)."""
        settings = {**DEFAULT_SETTINGS, "pixels_per_token": TINY_PIXELS_PER_TOKEN}
        return cls(_tiny_tokenizer(), TINY_CHAT_TEMPLATE, settings, source="tiny")

    @classmethod
    def from_folder(cls, path: str | Path) -> EagleProcessor:
        """Reads a local processor folder (see the module docstring); ConfigError naming what is wrong."""
        folder = Path(path).expanduser()
        where = f"--tokenizer-path {folder}"
        if not folder.is_dir():
            raise ConfigError([f"{where}: not a directory (GR00T N1.6 needs a local Eagle3 processor folder, e.g. a "
                               "download of aravindhs-NV/eagle3-processor-groot-n1d6)"])
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError([f"{where}: cannot load the tokenizer: {exc}"]) from None
        template = _read_chat_template(folder, tokenizer, where)
        if not template:
            raise ConfigError([f"{where}: no chat template (chat_template.json, the tokenizer config's "
                               "'chat_template' or chat_template.jinja)"])
        return cls(tokenizer, template, _image_settings(folder, where), source=str(folder.resolve()))

    def save(self, folder: str | Path) -> Path:
        """Writes the tokenizer, the chat template, processor_config.json and preprocessor_config.json (a folder
        :meth:`from_folder` reads back)."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        self.tokenizer.save_pretrained(str(out))
        (out / "chat_template.json").write_text(json.dumps({"chat_template": self.chat_template}))
        s = self.settings
        (out / "processor_config.json").write_text(json.dumps(
            {k: s[k] for k in ("image_token", "image_start_token", "image_end_token", "pixels_per_token")}, indent=1))
        (out / "preprocessor_config.json").write_text(json.dumps(
            {"image_mean": s["image_mean"], "image_std": s["image_std"], "do_rescale": True,
             "rescale_factor": 1 / 255, "do_normalize": True}, indent=1))
        return out

    # ------------------------------------------------------------------ prompts
    def tokens_per_image(self, height: int, width: int) -> int:
        """``<IMG_CONTEXT>`` tokens of one view of ``height`` x ``width`` pixels."""
        return height * width // int(self.settings["pixels_per_token"])

    def render(self, text: str, num_images: int) -> str:
        """The chat-template text of one user turn ``[text, image x num_images]``."""
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        content += [{"type": "image"} for _ in range(num_images)]
        return self.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                  add_generation_prompt=False, chat_template=self.chat_template)

    def expand(self, rendered: str, num_images: int, tokens_per_image: int) -> str:
        """``rendered`` with each ``<image-k>`` replaced by ``<image k><img>`` + image tokens + ``</img>``."""
        found = [int(k) for k in _PLACEHOLDER.findall(rendered)]
        if found != list(range(1, num_images + 1)):
            raise ConfigError([f"processor {self.source}: its chat template wrote the image placeholders {found} "
                               f"for {num_images} image(s) (Eagle's layout writes <image-1> ... <image-{num_images}>)"])
        s = self.settings
        span = s["image_start_token"] + s["image_token"] * tokens_per_image + s["image_end_token"]
        return _PLACEHOLDER.sub(lambda m: f"<image {m.group(1)}>{span}", rendered)

    def prompt_ids(self, text: str, *, num_images: int, tokens_per_image: int) -> list[int]:
        """Token ids of the prompt with every image span expanded to ``tokens_per_image`` image tokens."""
        expanded = self.expand(self.render(text, num_images), num_images, tokens_per_image)
        return list(self.tokenizer(expanded)["input_ids"])


def load_processor(kind: str, path: str | None) -> EagleProcessor:
    """The processor of ``model.processor``: the folder when one is given, else the built-in tiny one.

    Raises:
        ConfigError: ``eagle`` without a folder, or a folder that cannot be read.
    """
    return pick_processor(EagleProcessor, kind, path, needs_folder=(
        "GR00T N1.6 builds its prompt with the Eagle3 processor: pass --tokenizer-path DIR (a local Eagle3 processor "
        "folder) or data.tokenizer_path=DIR"))


def check_compatible(processor: EagleProcessor, *, patch_size: int, image_mean: list[float],
                     image_std: list[float], vocab_size: int, image_size: tuple[int, int]) -> list[str]:
    """Problems between the processor's settings and the model / data config (empty when they agree)."""
    s = processor.settings
    problems = []
    merged = (2 * patch_size) ** 2
    if int(s["pixels_per_token"]) != merged:
        problems.append(f"processor {processor.source}: pixels_per_token {s['pixels_per_token']} but one image token "
                        f"covers (2 x model.vision_patch_size)^2 = {merged} pixels")
    problems += statistics_problems(processor.source, s, image_mean=image_mean, image_std=image_std,
                                    processor_vocab=processor.vocab_size, vocab_size=vocab_size)
    if any(side % (2 * patch_size) for side in image_size):
        problems.append(f"data.image_size {tuple(image_size)} must be multiples of {2 * patch_size} pixels")
    return problems
