"""Run-config rules the VLA ports state the same way (no torch; ``validate`` and the specs' ``checks`` use them).

The ports' ``size_problems`` compose the rules here (widths, head multiples, the square patch grid, the GR00T action
head's sizes) with their own; :func:`run_config_check` adds the tokenizer-folder requirement and the reference
config.json beside ``--pretrained-checkpoint``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["action_head_problems", "builtin_vocab_problems", "multiple_problems", "patch_multiple_problems",
           "run_config_check", "tokenizer_folder_missing", "width_problems"]


def width_problems(kind: str, dim: int | None, limit: int, *, consequence: str = "") -> list[str]:
    """The message for a real state/action width above the model's padded one (empty when it fits).

    Args:
        kind: ``"state"`` or ``"action"`` (names data.<kind>_dim and model.max_<kind>_dim).
        dim: the data's width (None: not known yet, nothing to check).
        limit: the model's padded width.
        consequence: appended after the fix, e.g. ``" (a new action projection, ...)"``.
    """
    if dim is None or dim <= limit:
        return []
    return [f"data.{kind}_dim {dim} exceeds model.max_{kind}_dim {limit}; set model.max_{kind}_dim={dim}{consequence}"]


def multiple_problems(model: Any, *pairs: tuple[str, str]) -> list[str]:
    """``model.<a> is not a multiple of model.<b>`` for each ``(a, b)`` of ``pairs`` whose values do not divide
    (head counts of grouped-query attention, widths split over heads)."""
    return [f"model.{a} {getattr(model, a)} is not a multiple of model.{b} {getattr(model, b)}"
            for a, b in pairs if getattr(model, a) % getattr(model, b)]


def builtin_vocab_problems(vocab_size: int, ids: int, *, builtin: str, alternative: str) -> list[str]:
    """The message for an embedding table smaller than a built-in tokenizer's ids (empty when it fits).

    Args:
        vocab_size: model.vocab_size.
        ids: the built-in tokenizer's vocabulary size.
        builtin: what the built-in tokenizer is called in the message (``"tiny tokenizer"``).
        alternative: the model.tokenizer setting that needs no built-in ids (``"model.tokenizer=paligemma"``).
    """
    if vocab_size >= ids:
        return []
    return [f"model.vocab_size {vocab_size} is smaller than the {builtin}'s {ids} ids; raise it or use {alternative}"]


def tokenizer_folder_missing(config: Any) -> bool:
    """Whether a run config names no tokenizer folder: neither data.tokenizer_path, nor --tokenizer-path, nor the
    TOKENIZER_PATH environment variable."""
    data = config.data
    return not (data.tokenizer_path or config.training.tokenizer_path or data.resolved_tokenizer_path())


def patch_multiple_problems(image_size: Sequence[int], patch_size: int) -> list[str]:
    """The message for a square image side that is not a whole number of vision patches (empty when it is).

    Args:
        image_size: data.image_size (square: its first side is checked).
        patch_size: model.vision_patch_size.
    """
    if image_size[0] % patch_size:
        return [f"data.image_size {tuple(image_size)} is not a multiple of model.vision_patch_size {patch_size}"]
    return []


def action_head_problems(model: Any, data: Any, slots: Mapping[str, int], *, factor: int, rule: str,
                         why: str = "") -> list[str]:
    """The GR00T ports' size rules (empty when fine): the state width (a new state encoder otherwise), the action
    width, data.action_horizon against the steps the head denoises, each image side a multiple of ``factor``, and
    the embodiment slot (data.embodiment_id, else the slot of data.embodiment_tag in ``slots``; a tag without a slot
    is the data check's) below model.max_num_embodiments.

    Args:
        model, data: the port's sections.
        slots: the port's embodiment-tag table.
        factor: what each image side must be a multiple of (the vision patch merge).
        rule: how ``factor`` is made, as the message names it (``"2 x model.vision_patch_size"``).
        why: appended after the factor, e.g. ``" (the projector merges 2 x 2 patches)"``.
    """
    problems = width_problems("state", data.state_dim, model.max_state_dim,
                              consequence=f" (a new state encoder, not loadable from a {model.max_state_dim}-dim "
                              "checkpoint)")
    problems += width_problems("action", data.action_dim, model.max_action_dim)
    if data.action_horizon > model.action_horizon:
        problems.append(f"data.action_horizon {data.action_horizon} exceeds model.action_horizon "
                        f"{model.action_horizon} (the head denoises at most that many steps)")
    if any(side % factor for side in data.image_size):
        problems.append(f"data.image_size {tuple(data.image_size)} must be multiples of {rule} = {factor}{why}")
    slot = data.embodiment_id if data.embodiment_id is not None else slots.get(data.embodiment_tag)
    if slot is not None and slot >= model.max_num_embodiments:
        problems.append(f"embodiment slot {slot} (data.embodiment_tag {data.embodiment_tag!r}, data.embodiment_id "
                        f"{data.embodiment_id}) is not below model.max_num_embodiments {model.max_num_embodiments}")
    return problems


def run_config_check(model_config: type, data_config: type, size_problems: Callable[[Any, Any], list[str]], *,
                     needs_folder: Callable[[Any], bool], folder_message: str,
                     checkpoint_problems: Callable[[Any, str], list[str]] | None = None,
                     doc: str | None = None) -> Callable[[Any], list[str]]:
    """A port's ``check_run_config`` (what its specs' ``checks`` name).

    For a run config whose sections are the port's classes: ``size_problems(model, data)``, plus ``folder_message``
    when ``needs_folder(model)`` (the model's text settings want a tokenizer folder) and
    :func:`tokenizer_folder_missing`. For one whose model section is the port's and whose
    ``--pretrained-checkpoint`` exists: also ``checkpoint_problems(model, checkpoint)`` (the port's
    ``checkpoint_config_problems``: a reference config.json beside it is read before anything is built). Nothing
    for another model's config.

    Args:
        doc: the docstring of the check (a generic one when None).
    """

    def check_run_config(config: Any) -> list[str]:
        model, data = config.model, config.data
        if not isinstance(model, model_config):
            return []
        problems: list[str] = []
        if isinstance(data, data_config):
            problems = size_problems(model, data)
            if needs_folder(model) and tokenizer_folder_missing(config):
                problems.append(folder_message)
        checkpoint = getattr(config.training, "pretrained_checkpoint", None)
        if checkpoint_problems is not None and checkpoint and Path(checkpoint).exists():
            problems += checkpoint_problems(model, checkpoint)
        return problems

    check_run_config.__doc__ = doc or (f"Extra validation of a RunConfig whose sections are {model_config.__name__} / "
                                       f"{data_config.__name__} (the specs' ``checks``); see "
                                       "embodied_models.vla.checks.run_config_check.")
    return check_run_config
