"""MetaWorld task tables and suites, as lerobot 0.6.1 defines them (no simulator import except for ``mt10``).

``tasks.json`` next to this module holds lerobot's ``metaworld_config.json`` tables: the difficulty groups
(``DIFFICULTY_TO_TASKS``: easy 28, medium 11, hard 6, very_hard 5), the instruction of every task
(``TASK_DESCRIPTIONS``) and the scripted expert class of every task (``TASK_POLICY_MAPPING``, names in
``metaworld.policies``). The ``mt10`` suite is MetaWorld's own MT10 list (``metaworld.env_dict.MT10_V3``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import attrs

from embodied_core.errors import UsageError, did_you_mean

__all__ = ["GROUPS", "SUITES", "TaskSelection", "description", "expert_class_name", "select_tasks", "tables"]

GROUPS = ("easy", "medium", "hard", "very_hard")
"""lerobot's difficulty groups, in the order papers report them."""

SUITES = (*GROUPS, "mt10")
"""What ``--suite`` accepts."""


@functools.cache
def tables() -> Mapping[str, Any]:
    """The tables of ``tasks.json`` (read once)."""
    text = resources.files(__package__).joinpath("tasks.json").read_text(encoding="utf-8")
    return json.loads(text)


def description(task: str) -> str:
    """The instruction lerobot gives a policy for ``task`` (``"Press a button from the top"``)."""
    return tables()["TASK_DESCRIPTIONS"][task]


def expert_class_name(task: str) -> str:
    """The ``metaworld.policies`` class of ``task``'s scripted expert."""
    return tables()["TASK_POLICY_MAPPING"][task]


def _group_of(task: str) -> str:
    for group in GROUPS:
        if task in tables()["DIFFICULTY_TO_TASKS"][group]:
            return group
    raise KeyError(task)


def _mt10() -> tuple[str, ...]:
    from embodied_eval.envs.metaworld.gym_env import import_metaworld

    import_metaworld()  # a clear error if a metaworld.py shadows the package
    from metaworld.env_dict import MT10_V3

    return tuple(MT10_V3)


@attrs.frozen(kw_only=True)
class TaskSelection:
    """The tasks an evaluation or a collection runs, and the group each belongs to."""

    tasks: tuple[str, ...]
    groups: Mapping[str, tuple[str, ...]]
    """``{difficulty group: its tasks among`` :attr:`tasks` ``}`` (lerobot's groups; empty ones left out)."""


def _check_task(name: str, flag: str) -> str:
    task = name.strip().removeprefix("metaworld-")  # lerobot accepts its env-id spelling too
    known = tables()["TASK_DESCRIPTIONS"]
    if task not in known:
        hint = did_you_mean(task, known)
        raise UsageError(f"{flag} {name!r}: not a MetaWorld v3 task{hint}; the 50 tasks are listed by "
                         f"--suite easy|medium|hard|very_hard (e.g. button-press-topdown-v3, reach-v3)")
    return task


def select_tasks(task: str | None, suite: str | None) -> TaskSelection:
    """Resolves ``--task`` (one name or a comma-separated list) or ``--suite`` into tasks and their groups.

    Raises:
        UsageError: neither or both given, an unknown suite or task name, or a task listed twice.
    """
    if (task is None) == (suite is None):
        raise UsageError("metaworld: give --task NAME[,NAME...] or --suite " + "|".join(SUITES) + " (one of them)")
    if suite is not None:
        if suite not in SUITES:
            raise UsageError(f"--suite {suite!r}: valid suites are {', '.join(SUITES)}")
        names = _mt10() if suite == "mt10" else tuple(tables()["DIFFICULTY_TO_TASKS"][suite])
    else:
        names = tuple(_check_task(name, "--task") for name in str(task).split(",") if name.strip())
        if not names:
            raise UsageError("--task: no task name given")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise UsageError(f"--task lists {', '.join(repeated)} more than once")
    groups = {g: tuple(n for n in names if _group_of(n) == g) for g in GROUPS}
    return TaskSelection(tasks=names, groups={g: members for g, members in groups.items() if members})
