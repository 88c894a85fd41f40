"""``--task-name``: the task string of samples whose dataset has no task / language annotation for them."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DefaultTaskDataset", "with_default_task"]


class DefaultTaskDataset:
    """A map-style view of ``dataset`` whose samples without a task (no ``task`` key, None, or a blank string)
    get ``task_name``; samples with a task keep theirs.

    Args:
        dataset: a map-style dataset of sample dicts.
        task_name: the fallback task string (``--task-name``).
    """

    def __init__(self, dataset: Any, task_name: str) -> None:
        self.dataset = dataset
        self.task_name = task_name

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.item(index)

    def decode_batch(self, indices: Sequence[int]) -> contextlib.AbstractContextManager[Any]:
        """The wrapped dataset's ``decode_batch`` (a batch's shared decoding, see ``embodied_core.data.loader``)."""
        from embodied_core.data.loader import batch_decoding

        return batch_decoding(self.dataset, indices)

    def item(self, index: int, *, info: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Sample ``index``; ``info`` goes to the dataset's own ``item`` (merged before its transform) when it has one,
        else into the sample (see ``embodied_core.data.mixture.drawn``)."""
        if info and callable(getattr(self.dataset, "item", None)):
            sample = self.dataset.item(index, info=info)
        else:
            sample = {**self.dataset[index], **(info or {})}
        task = sample.get("task")
        if task is None or (isinstance(task, str) and not task.strip()):
            sample = {**sample, "task": self.task_name}
        return sample


def with_default_task(dataset: Any, task_name: str) -> DefaultTaskDataset:
    """``dataset`` with ``--task-name`` for its samples that have no task."""
    return DefaultTaskDataset(dataset, task_name)
