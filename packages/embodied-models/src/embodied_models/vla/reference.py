"""Reading a reference policy's config (lerobot's ``config.json``) field by field: the pieces the VLA ports share.

A port declares its tables (reference key -> ``model.*`` field and the reference's default; keys fixed to the values
the port implements; keys that configure the run or take no part in the computation) and composes these helpers:

- :func:`fixed_problems`: one message per fixed key whose value the port does not implement;
- :func:`warn_unknown`: keys no table knows, named in a warning (other lerobot / transformers versions write
  bookkeeping keys of their own, so a real checkpoint is not refused for one);
- :func:`disagreements`: the ``model.*`` fields where the reference's config and the model config differ;
- :func:`reference_config` / :func:`checkpoint_config_file`: the ``config.json`` that describes a checkpoint path;
- :data:`LEROBOT_OPTIMIZER_KEYS` / :data:`LEROBOT_SCHEDULER_KEYS` / :data:`LEROBOT_HUB_KEYS`: the keys every lerobot
  policy config writes for its optimizer and scheduler presets and the hub, with the flag that sets the same here
  (a port's ``RUN_KEYS`` splices them in);
- :func:`raise_problems`: the ConfigError of a port's ``reference_model_fields`` (``<source>: <problem>; ...``);
- :func:`checkpoint_config_checks`: a port's ``checkpoint_config_problems`` / ``check_checkpoint_config`` pair (read
  the config.json beside a checkpoint, refuse what the port does not implement, compare the rest with the model
  config), from the port's policy type, label and field parser.

No torch.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from embodied_core.errors import ConfigError

__all__ = ["LEROBOT_HUB_KEYS", "LEROBOT_OPTIMIZER_KEYS", "LEROBOT_SCHEDULER_KEYS", "CheckpointConfigChecks",
           "ModelFields", "checkpoint_config_checks", "checkpoint_config_file", "disagreements", "fixed_problems",
           "raise_problems", "reference_config", "same", "warn_unknown"]

logger = logging.getLogger("embodied.models.vla")

LEROBOT_OPTIMIZER_KEYS: dict[str, str] = {
    "optimizer_lr": "--lr-base",
    "optimizer_betas": "--adam-beta1 / --adam-beta2",
    "optimizer_eps": "--adam-eps",
    "optimizer_weight_decay": "--weight-decay",
    "optimizer_grad_clip_norm": "--clip-grad",
}
"""lerobot's optimizer-preset keys (every policy config has them) -> the flag of our run config that sets the same."""

LEROBOT_SCHEDULER_KEYS: dict[str, str] = {
    "scheduler_warmup_steps": "--lr-warmup-iters",
    "scheduler_decay_steps": "--lr-decay-iters",
    "scheduler_decay_lr": "--min-lr",
}
"""lerobot's cosine-decay scheduler-preset keys -> the flag of our run config that sets the same."""

LEROBOT_HUB_KEYS: dict[str, str] = {
    "push_to_hub": "hub upload (not done by embodied)",
    "repo_id": "hub upload (not done by embodied)",
    "private": "hub upload (not done by embodied)",
    "tags": "hub upload (not done by embodied)",
    "license": "hub upload (not done by embodied)",
    "pretrained_path": "--pretrained-checkpoint",
    "pretrained_revision": "hub revision (local paths only)",
}
"""lerobot's ``PreTrainedConfig`` hub keys -> what stands for them here (no hub access: local paths only)."""
_WARNED: set[tuple[str, str, str]] = set()


def same(a: Any, b: Any) -> bool:
    """Config-value equality: bools only equal bools, numbers within float tolerance, lists/tuples item by item."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _name(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def fixed_problems(section: Mapping[str, Any], fixed: Mapping[str, tuple[Any, ...]], where: str = "") -> list[str]:
    """``<where>.<key> = <value> is not implemented by this port (supported: ...)`` for each key of ``fixed``
    (key -> the supported values) that ``section`` sets to another value."""
    problems = []
    for key, supported in fixed.items():
        if key in section and not any(same(section[key], value) for value in supported):
            choices = " or ".join(repr(v) for v in supported)
            problems.append(f"{_name(where, key)} = {section[key]!r} is not implemented by this port "
                            f"(supported: {choices})")
    return problems


def warn_unknown(section: Mapping[str, Any], known: Collection[str], *, where: str, source: str, port: str,
                 log: logging.Logger = logger) -> None:
    """Names each key of ``section`` outside ``known`` in a warning (once per file, section and key)."""
    for key in section:
        if key in known or (source, where, key) in _WARNED:
            continue
        _WARNED.add((source, where, key))
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        log.warning("%s: %s is not known to the %s port and is not read%s; if it changes the network, the result "
                    "will differ from the reference", source, _name(where, key), port, hint)


def disagreements(model_config: Any, fields: Mapping[str, Any], *, skip: Collection[str] = ()) -> list[str]:
    """``model.<field>=<reference> (checkpoint) vs <ours> (model)`` for each field (but ``skip``) that differs."""
    out = []
    for name, value in fields.items():
        if name in skip:
            continue
        ours = getattr(model_config, name)
        if not same(list(ours) if isinstance(ours, tuple) else ours, list(value) if isinstance(value, tuple)
                    else value):
            out.append(f"model.{name}={value!r} (checkpoint) vs {ours!r} (model)")
    return out


def checkpoint_config_file(source: str | Path) -> Path | None:
    """The ``config.json`` that describes a checkpoint path (beside the file, in the folder or its
    ``pretrained_model/``), or None."""
    path = Path(source)
    folder = path if path.is_dir() else path.parent
    for candidate in (folder / "config.json", folder / "pretrained_model" / "config.json"):
        if candidate.is_file():
            return candidate
    return None


def reference_config(source: str | Path, *, policy_type: str | Callable[[Mapping[str, Any]], bool]
                     ) -> tuple[Path, dict[str, Any]] | str | None:
    """The reference config describing ``source``: ``(path, document)``; None when there is no config.json or it
    describes something else (another policy, our own folder); a message when it is unreadable.

    Args:
        source: the checkpoint path (file or folder).
        policy_type: the document's ``type`` or ``model_type`` (lerobot's policy type, e.g. ``"pi05"``), or a test
            of the document for a port whose reference configs have several kinds.
    """
    path = checkpoint_config_file(source)
    if path is None:
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"{path}: not readable JSON ({exc})"
    if not isinstance(doc, dict):
        return None
    kinds = (doc.get("type"), doc.get("model_type"))
    describes = policy_type(doc) if callable(policy_type) else policy_type in kinds
    return (path, doc) if describes else None


def raise_problems(problems: Collection[str], source: str) -> None:
    """ConfigError ``<source>: <problem>; <problem>...`` when ``problems`` is not empty (what a port's
    ``reference_model_fields`` raises for the keys whose values it does not implement)."""
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))


class ModelFields(Protocol):
    """A port's ``reference_model_fields``: the ``model.*`` fields a reference document sets; ConfigError naming
    ``source`` and the keys it does not implement."""

    def __call__(self, doc: Mapping[str, Any], *, source: str) -> dict[str, Any]: ...


class CheckpointConfigChecks(NamedTuple):
    """A port's pair of checkpoint-config checks (what :func:`checkpoint_config_checks` returns)."""

    problems: Callable[[Any, str | Path], list[str]]
    """``checkpoint_config_problems(model_config, source)``: why the model config cannot run the checkpoint."""
    check: Callable[[Any, str | Path], None]
    """``check_checkpoint_config(model_config, source)``: ConfigError with those problems when there are any."""


def checkpoint_config_checks(label: str, *, policy_type: str | Callable[[Mapping[str, Any]], bool],
                             model_fields: ModelFields, not_compared: Collection[str] = (),
                             refused: Callable[[Mapping[str, Any]], list[str]] | None = None,
                             compare: Callable[[Any, dict[str, Any]], list[str]] | None = None,
                             ) -> CheckpointConfigChecks:
    """A port's ``checkpoint_config_problems`` and ``check_checkpoint_config``: the reference ``config.json`` beside a
    checkpoint (:func:`reference_config`) must be one the port implements and agree with the model config.

    ``checkpoint_config_problems(model_config, source)`` returns (empty when there is no such config.json, it
    describes something else, or it agrees):

    - ``<path>: not readable JSON (...)`` for a config.json that does not parse;
    - ``<path>: <refusal>; ...`` for what ``refused(doc)`` names (a port that lists its refusals before parsing);
    - ``str(ConfigError)`` of ``model_fields(doc, source=<path>)``;
    - ``<path> describes another <label> than the model config: <disagreement>; ...; set those model fields (or load
      a matching checkpoint)`` for the fields where ``compare(model_config, fields)`` (default: :func:`disagreements`
      but ``not_compared``) finds the model config differs.

    ``check_checkpoint_config(model_config, source)`` raises them joined in one ConfigError.

    Args:
        label: the port as the message names it (``"pi0.5"``).
        policy_type: which documents describe this port's checkpoints (see :func:`reference_config`).
        model_fields: the port's ``reference_model_fields``.
        not_compared: ``model.*`` fields a checkpoint may state differently (a fine-tune's choices).
        refused: the port's messages for keys it does not implement, when it lists them before parsing.
        compare: the port's own comparison, for a port whose fields have equivalent spellings.
    """

    def checkpoint_config_problems(model_config: Any, source: str | Path) -> list[str]:
        found = reference_config(source, policy_type=policy_type)
        if found is None or isinstance(found, str):
            return [found] if found else []
        path, doc = found
        refusals = refused(doc) if refused is not None else []
        if refusals:
            return [f"{path}: " + "; ".join(refusals)]
        try:
            fields = model_fields(doc, source=str(path))
        except ConfigError as exc:
            return [str(exc)]
        if compare is not None:
            mismatched = compare(model_config, fields)
        else:
            mismatched = disagreements(model_config, fields, skip=not_compared)
        if mismatched:
            return [f"{path} describes another {label} than the model config: " + "; ".join(mismatched)
                    + "; set those model fields (or load a matching checkpoint)"]
        return []

    def check_checkpoint_config(model_config: Any, source: str | Path) -> None:
        problems = checkpoint_config_problems(model_config, source)
        if problems:
            raise ConfigError("; ".join(problems))

    checkpoint_config_problems.__doc__ = (
        f"Why ``model_config`` cannot run the checkpoint at ``source`` by the reference ``config.json`` beside it "
        f"(empty when there is none, it describes something other than {label}, or it agrees); see "
        "embodied_models.vla.reference.checkpoint_config_checks.")
    check_checkpoint_config.__doc__ = "ConfigError with ``checkpoint_config_problems`` when there are any."
    return CheckpointConfigChecks(checkpoint_config_problems, check_checkpoint_config)
