"""The ``--use-lora`` / ``--lora-*`` flags as one settings object, and their rules (checked before anything is built).

No torch and no peft here: validation runs for ``embodied train --help``-cheap checks and before the model exists.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Literal

import attrs

from embodied_core.config.training_args import TrainingArgs
from embodied_core.lora.layout import is_adapter_folder

__all__ = ["BASE_MUTATING_INITS", "LoraSettings", "TargetSpec", "lora_problems", "parse_init", "parse_names",
           "parse_targets"]

PLAIN_INITS = ("true", "false", "gaussian", "orthogonal", "mica")
"""``--lora-init`` values that leave the base weights untouched."""
BASE_MUTATING_INITS = ("pissa", "olora")
"""``--lora-init`` values (``pissa_niter_<K>`` too) that move part of each base weight into its adapter."""
_PISSA_NITER = re.compile(r"^pissa_niter_(\d+)$")
_DATA_DRIVEN = {"eva": "a calibration dataloader", "corda": "a calibration pass over data",
                "loftq": "a quantized base model and a loftq_config", "lora_ga": "gradient estimates from data"}
_NAME_LIST = re.compile(r"^[\w.,\s]+$")
_LORA_FLAGS = ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "lora_modules_to_save", "lora_bias",
               "lora_init")


@attrs.frozen
class TargetSpec:
    """Which layers get adapters.

    Attributes:
        kind: ``names`` (PEFT's rule: a module path or its last dotted parts), ``regex`` (``re.fullmatch`` on whole
            module paths) or ``default`` (the model's ``default_lora_targets()``: ``fnmatch`` patterns).
        values: the names, or the single regular expression; empty for ``default``.
    """

    kind: Literal["names", "regex", "default"]
    values: tuple[str, ...] = ()

    def describe(self) -> str:
        """How the spec reads in messages."""
        if self.kind == "default":
            return "the model's default_lora_targets()"
        return f"--lora-target-modules '{','.join(self.values)}'"


def parse_names(text: str | None) -> tuple[str, ...]:
    """``"a, b.c"`` -> ``("a", "b.c")`` (empty items dropped)."""
    return tuple(item.strip() for item in (text or "").split(",") if item.strip())


def parse_targets(text: str | None) -> TargetSpec:
    """``--lora-target-modules``: comma-separated names, or one regular expression (ValueError if it does not compile).

    A value made only of letters, digits, ``_``, ``.``, ``,`` and spaces is a list of names; anything else is a
    regular expression, as in PEFT (where a string is a regex and a list holds names).
    """
    if text is None or not text.strip():
        return TargetSpec("default")
    if _NAME_LIST.match(text):
        return TargetSpec("names", parse_names(text))
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError(f"{text!r} is neither a list of module names nor a valid regular expression ({exc})") from None
    return TargetSpec("regex", (text,))


def parse_init(text: str) -> bool | str:
    """``--lora-init`` -> PEFT's ``init_lora_weights`` (True/False or the method name); ValueError when unknown."""
    value = text.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    if value in PLAIN_INITS or value in BASE_MUTATING_INITS or _PISSA_NITER.match(value):
        return value
    if value in _DATA_DRIVEN:
        raise ValueError(f"{text!r} needs {_DATA_DRIVEN[value]}, which the training flags do not provide; use one "
                         f"of {', '.join(PLAIN_INITS + BASE_MUTATING_INITS)}, pissa_niter_<K>")
    raise ValueError(f"unknown initialisation {text!r}; valid: {', '.join(PLAIN_INITS + BASE_MUTATING_INITS)}, "
                     "pissa_niter_<K> (K >= 0 subspace iterations)")


def mutates_base(init: bool | str) -> bool:
    """Whether PEFT's ``init`` changes the base weights (PiSSA, its fast-SVD variant, OLoRA)."""
    return isinstance(init, str) and (init in BASE_MUTATING_INITS or bool(_PISSA_NITER.match(init)))


@attrs.frozen(kw_only=True)
class LoraSettings:
    """The LoRA flags of a run, parsed.

    Attributes:
        r, alpha, dropout, bias: PEFT's ``r``, ``lora_alpha``, ``lora_dropout``, ``bias``.
        targets: ``--lora-target-modules``.
        modules_to_save: ``--lora-modules-to-save`` names.
        init: PEFT's ``init_lora_weights``.
    """

    r: int
    alpha: int
    dropout: float
    targets: TargetSpec
    modules_to_save: tuple[str, ...]
    bias: Literal["none", "all", "lora_only"]
    init: bool | str

    @classmethod
    def from_args(cls, args: TrainingArgs) -> LoraSettings:
        """The settings of ``args`` (validated by :func:`lora_problems` first; ValueError otherwise)."""
        return cls(r=args.lora_r, alpha=args.lora_alpha, dropout=args.lora_dropout,
                   targets=parse_targets(args.lora_target_modules),
                   modules_to_save=parse_names(args.lora_modules_to_save), bias=args.lora_bias,
                   init=parse_init(args.lora_init))

    @property
    def mutates_base(self) -> bool:
        """True for PiSSA / OLoRA, whose initialisation moves part of each base weight into the adapter."""
        return mutates_base(self.init)


def _adapter_folder_problems(args: TrainingArgs) -> list[str]:
    """A LoRA checkpoint named where full weights (or a full-model run) are expected."""
    problems = []
    if args.pretrained_checkpoint and is_adapter_folder(Path(args.pretrained_checkpoint)):
        problems.append(f"--pretrained-checkpoint {args.pretrained_checkpoint}: a LoRA checkpoint (adapters and a "
                        "reference to their base), not full weights; `embodied checkpoint merge-lora "
                        f"{args.pretrained_checkpoint} DST` writes a folder to start from")
    if args.resume_from and not args.use_lora and is_adapter_folder(Path(args.resume_from)):
        problems.append(f"--resume-from {args.resume_from}: holds LoRA adapters; resume it with --use-lora and the "
                        "LoRA flags it was trained with")
    return problems


def lora_problems(args: TrainingArgs) -> list[str]:
    """Problems with the LoRA flags (empty when all is well); the flags without ``--use-lora`` are problems too."""
    defaults = {f.name: f.default for f in attrs.fields(TrainingArgs)}
    problems = _adapter_folder_problems(args)
    if not args.use_lora:
        return problems + [f"--{name.replace('_', '-')} {getattr(args, name)!r}: read only with --use-lora; add "
                           "--use-lora or remove the flag" for name in _LORA_FLAGS
                           if getattr(args, name) != defaults[name]]
    if importlib.util.find_spec("peft") is None:
        problems.append("--use-lora: needs the package peft (pip install 'embodied-core[lora]', or pip install peft)")
    if args.lora_dropout >= 1.0:
        problems.append(f"--lora-dropout {args.lora_dropout}: must be < 1 (1 would drop every adapter input)")
    try:
        parse_targets(args.lora_target_modules)
    except ValueError as exc:
        problems.append(f"--lora-target-modules: {exc}")
    try:
        init = parse_init(args.lora_init)
    except ValueError as exc:
        problems.append(f"--lora-init: {exc}")
    else:
        if init == "orthogonal" and args.lora_r % 2:
            problems.append(f"--lora-init orthogonal: needs an even --lora-r (got {args.lora_r})")
    if args.lora_modules_to_save is not None and not parse_names(args.lora_modules_to_save):
        problems.append("--lora-modules-to-save: empty; name at least one module or leave the flag out")
    if args.save_format != "safetensors":
        problems.append(f"--save-format {args.save_format}: with --use-lora, checkpoints hold only the adapters, "
                        "in PEFT's format (adapter_model.safetensors); leave --save-format at safetensors")
    return problems
