"""Loading lerobot / openpi-PyTorch pi0.5 checkpoints through a declared key map with a strict report.

Source layouts (after an optional leading ``model.``, which lerobot hub checkpoints carry):

- lerobot ``PI05Pytorch`` / openpi ``PI0Pytorch(pi05=True)``: ``paligemma_with_expert.paligemma.model.*``
  (transformers >= 4.52 PaliGemma) or ``paligemma_with_expert.paligemma.{vision_tower,multi_modal_projector,
  language_model.model}.*`` (older transformers), ``paligemma_with_expert.gemma_expert.model.*``,
  ``action_in_proj``, ``action_out_proj``, ``time_mlp_in/out`` (old name ``action_time_mlp_in/out``).
- SigLIP keys with (transformers < 5.20) or without the inner ``vision_model.`` level.
- this package's own names (a checkpoint written by ``embodied train``).

Declared, never silent: ``lm_head.weight`` is the tied source of ``embed_tokens`` when a checkpoint has no
embedding table (lerobot hub files); the expert's ``lm_head`` and pi0's ``state_proj`` are known-unused.
Every other key either matches a rule or is reported as unexpected; every model key not filled is missing;
shape mismatches are reported. Any of the three is a CheckpointError unless allowed by a pattern.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import attrs
import torch
from torch import nn

from embodied_core.errors import CheckpointError

__all__ = ["KEY_RULES", "LoadReport", "load_pi05_checkpoint", "map_key", "read_checkpoint"]

logger = logging.getLogger("embodied.models.pi05")

_PG = r"paligemma_with_expert\.paligemma\."
_EX = r"paligemma_with_expert\.gemma_expert\."
KEY_RULES: tuple[tuple[str, str], ...] = (
    # vision tower (with or without the inner vision_model level; PaliGemma with or without .model)
    (_PG + r"(?:model\.)?vision_tower\.(?:vision_model\.)?(?P<rest>.+)", "vision_tower.{rest}"),
    (_PG + r"(?:model\.)?multi_modal_projector\.linear\.(?P<rest>.+)", "multi_modal_projector.{rest}"),
    (_PG + r"(?:model\.language_model\.|language_model\.model\.)embed_tokens\.weight", "embed_tokens.weight"),
    (_PG + r"(?:model\.language_model\.|language_model\.model\.)layers\.(?P<i>\d+)\.(?P<rest>.+)",
     "layers.{i}.vlm.{rest}"),
    (_PG + r"(?:model\.language_model\.|language_model\.model\.)norm\.weight", "vlm_norm.weight"),
    (_EX + r"model\.layers\.(?P<i>\d+)\.(?P<rest>.+)", "layers.{i}.expert.{rest}"),
    (_EX + r"model\.norm\.(?P<rest>.+)", "expert_norm.{rest}"),
    (r"(?:action_)?time_mlp_(?P<which>in|out)\.(?P<rest>.+)", "time_mlp_{which}.{rest}"),
    (r"action_(?P<which>in|out)_proj\.(?P<rest>.+)", "action_{which}_proj.{rest}"),
)
"""(source regex, target template), first match wins; a key matching none is unexpected."""

TIED_SOURCES: tuple[tuple[str, str], ...] = (
    (_PG + r"(?:language_model\.)?lm_head\.weight", "embed_tokens.weight"),
)
"""Keys that fill a target only when the checkpoint lacks it (PaliGemma ties lm_head to embed_tokens)."""

KNOWN_UNUSED: tuple[str, ...] = (
    _EX + r"lm_head\.weight",  # the expert has no token head in pi0.5
    r"state_proj\.(weight|bias)",  # pi0's state token; pi0.5 puts the state into the prompt
)
"""Source keys dropped on purpose (listed in the report as ``ignored``)."""

_OWN_PREFIXES = ("vision_tower.", "multi_modal_projector.", "embed_tokens.", "layers.", "vlm_norm.", "expert_norm.",
                 "action_in_proj.", "action_out_proj.", "time_mlp_in.", "time_mlp_out.")
_COMPILED = tuple((re.compile(src), dst) for src, dst in KEY_RULES)
_TIED = tuple((re.compile(src), dst) for src, dst in TIED_SOURCES)
_UNUSED = tuple(re.compile(src) for src in KNOWN_UNUSED)


def map_key(key: str) -> str | None:
    """Our parameter name for a source key, or None when no rule applies (our own names map to themselves)."""
    candidates = (key, key.removeprefix("model.")) if key.startswith("model.") else (key,)
    for candidate in candidates:
        for pattern, template in _COMPILED:
            match = pattern.fullmatch(candidate)
            if match:
                return template.format(**match.groupdict())
    if key.startswith(_OWN_PREFIXES):
        return key
    return None


@attrs.define
class LoadReport:
    """What a checkpoint load did; ``ok`` when nothing unexpected, missing or mismatched remains."""

    loaded: list[str] = attrs.Factory(list)
    missing: list[str] = attrs.Factory(list)
    unexpected: list[str] = attrs.Factory(list)
    mismatched: list[str] = attrs.Factory(list)
    ignored: list[str] = attrs.Factory(list)
    tied: list[str] = attrs.Factory(list)

    @property
    def ok(self) -> bool:
        """Whether every model key was filled with a tensor of the right shape and no key was left over."""
        return not (self.missing or self.unexpected or self.mismatched)

    def summary(self, limit: int = 20) -> str:
        """Human-readable listing of the problems (up to ``limit`` keys each)."""
        lines = [f"loaded {len(self.loaded)} tensors"]
        for name in ("missing", "unexpected", "mismatched", "ignored", "tied"):
            keys = getattr(self, name)
            if keys:
                shown = ", ".join(keys[:limit]) + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")
                lines.append(f"{name} ({len(keys)}): {shown}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- sources
def _files_of(path: Path) -> list[Path]:
    """The weight files of a checkpoint location (file, sharded folder, lerobot folder, run checkpoint)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CheckpointError(f"pretrained checkpoint {path}: no such file or directory")
    for candidate in (path, path / "pretrained_model"):
        index = candidate / "model.safetensors.index.json"
        if index.is_file():
            try:
                weight_map = json.loads(index.read_text())["weight_map"]
            except (json.JSONDecodeError, KeyError) as exc:
                raise CheckpointError(f"{index}: not a safetensors index (needs a 'weight_map'): {exc}") from None
            files = sorted({candidate / name for name in weight_map.values()})
            absent = [str(f) for f in files if not f.is_file()]
            if absent:
                raise CheckpointError(f"{index} names shard(s) that do not exist: {', '.join(absent)}")
            return files
        for name in ("model.safetensors", "model.pt", "pytorch_model.bin"):
            if (candidate / name).is_file():
                return [candidate / name]
    raise CheckpointError(f"pretrained checkpoint {path}: found no model.safetensors, model.safetensors.index.json, "
                          "model.pt or pytorch_model.bin (also looked in pretrained_model/)")


def read_checkpoint(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Yields (key, tensor) of a checkpoint one tensor at a time (safetensors shards are read lazily)."""
    for file in _files_of(Path(path)):
        if file.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(file), framework="pt", device="cpu") as handle:
                for key in handle.keys():  # noqa: SIM118 - safe_open is not a Mapping
                    yield key, handle.get_tensor(key)
        else:
            state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
            if isinstance(state, Mapping) and "model" in state and isinstance(state["model"], Mapping):
                state = state["model"]
            if not isinstance(state, Mapping):
                raise CheckpointError(f"{file}: expected a state dict, got {type(state).__name__}")
            yield from state.items()


def _allowed(key: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns)


def load_pi05_checkpoint(
    model: nn.Module,
    source: str | Path | Mapping[str, torch.Tensor],
    *,
    allow_missing: Iterable[str] = (),
    allow_unexpected: Iterable[str] = (),
    allow_mismatched: Iterable[str] = (),
) -> LoadReport:
    """Copies a lerobot/openpi/own-layout checkpoint into ``model`` (cast to each parameter's dtype).

    Args:
        model: a Pi05Model (parameters materialized, not on the meta device).
        source: a file, a sharded safetensors folder with index, a lerobot folder (optionally with
            ``pretrained_model/``), or an in-memory state dict.
        allow_missing, allow_unexpected, allow_mismatched: fnmatch patterns (over our names for missing
            and mismatched, over source names for unexpected) that are reported but not an error.

    Returns:
        The report. Raises CheckpointError listing every missing, unexpected or shape-mismatched key not
        covered by an allow pattern.
    """
    allow_missing, allow_unexpected, allow_mismatched = list(allow_missing), list(allow_unexpected), \
        list(allow_mismatched)
    targets = dict(model.state_dict(keep_vars=True))
    report = LoadReport()
    filled: set[str] = set()
    tied: dict[str, tuple[str, torch.Tensor]] = {}
    items = source.items() if isinstance(source, Mapping) else read_checkpoint(source)
    with torch.no_grad():
        for key, tensor in items:
            target = map_key(key)
            if target is None:
                stripped = key.removeprefix("model.")
                if any(p.fullmatch(stripped) for p in _UNUSED):
                    report.ignored.append(key)
                    continue
                tie = next((dst for p, dst in _TIED if p.fullmatch(stripped)), None)
                if tie is not None:
                    tied[tie] = (key, tensor)
                    continue
                report.unexpected.append(key)
                continue
            _copy(targets, target, key, tensor, report, filled)
        for target, (key, tensor) in tied.items():
            if target in filled:
                report.ignored.append(key)  # the checkpoint has both; the embedding table wins
            else:
                report.tied.append(f"{key} -> {target}")
                _copy(targets, target, key, tensor, report, filled)
    mismatched_targets = {entry.split(" ")[0] for entry in report.mismatched}
    report.missing = sorted(k for k in targets if k not in filled and k not in mismatched_targets)
    problems = ([f"missing: {k}" for k in report.missing if not _allowed(k, allow_missing)]
                + [f"unexpected: {k}" for k in report.unexpected if not _allowed(k, allow_unexpected)]
                + [f"shape mismatch: {k}" for k in report.mismatched
                   if not _allowed(k.split(" ")[0], allow_mismatched)])
    where = source if not isinstance(source, Mapping) else "<state dict>"
    if problems:
        shown = "\n  ".join(problems[:40]) + (f"\n  ... ({len(problems) - 40} more)" if len(problems) > 40 else "")
        raise CheckpointError(f"pi0.5 checkpoint {where} does not fit the model ({len(problems)} problem(s)):\n  "
                              f"{shown}\nAllow known differences explicitly (allow_missing=/allow_unexpected= "
                              "patterns) or check model.* sizes against the checkpoint.")
    logger.info("pi0.5 checkpoint %s: %s", where, report.summary().replace("\n", "; "))
    return report


def _copy(targets: dict[str, torch.Tensor], target: str, key: str, tensor: torch.Tensor, report: LoadReport,
          filled: set[str]) -> None:
    param = targets.get(target)
    if param is None:
        report.unexpected.append(key)
        return
    if tuple(param.shape) != tuple(tensor.shape):
        report.mismatched.append(f"{target} (model {tuple(param.shape)}, checkpoint {key} {tuple(tensor.shape)})")
        return
    if target in filled:
        raise CheckpointError(f"checkpoint maps two keys onto {target} (the second is {key}); it mixes layouts")
    param.copy_(tensor.to(param.dtype))
    filled.add(target)
    report.loaded.append(target)
