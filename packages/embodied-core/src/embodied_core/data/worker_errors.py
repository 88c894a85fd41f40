"""Our errors raised inside DataLoader workers reach the trainer as themselves, not as torch's wrapped text.

torch re-raises a worker's exception in the main process as ``type(exc)("Caught X in DataLoader worker process
N.\\nOriginal Traceback ...")``: a bad file then shows a worker traceback before our one-line message. A worker
therefore does not raise an :class:`~embodied_core.errors.EmbodiedError` (a ``DataError`` naming a file, ...):
it returns a :class:`WorkerFailure` in place of the batch, and the loader raises the rebuilt exception (same
type, same message, same attributes) in the main process. The worker's traceback goes to the debug log.
Other exceptions (bugs) keep torch's wrapping, traceback included.
"""

from __future__ import annotations

import logging
import pickle
import traceback
from typing import Any

from torch.utils.data import get_worker_info

from embodied_core.errors import EmbodiedError

__all__ = ["WorkerFailure", "in_worker", "raise_if_failure"]

logger = logging.getLogger("embodied.data")


def in_worker() -> bool:
    """True inside a DataLoader worker process."""
    return get_worker_info() is not None


def _picklable(obj: Any) -> bool:
    try:
        pickle.dumps(obj)
    except Exception:  # pickling can fail with many types (PicklingError, TypeError, AttributeError)
        return False
    return True


class WorkerFailure:
    """An :class:`EmbodiedError` raised in a DataLoader worker, carried to the main process in place of a batch.

    The exception travels as its class, ``args`` and ``__dict__`` and is rebuilt without calling ``__init__``
    (``ConfigError(problems)`` would otherwise format its message twice).
    """

    __slots__ = ("args", "exc_type", "state", "traceback", "worker_id")

    def __init__(self, exc: EmbodiedError) -> None:
        info = get_worker_info()
        self.worker_id = info.id if info is not None else None
        self.traceback = "".join(traceback.format_exception(exc))
        self.exc_type: type[BaseException] = type(exc)
        self.args: tuple[Any, ...] = exc.args
        self.state: dict[str, Any] = dict(getattr(exc, "__dict__", {}))
        if not _picklable((self.exc_type, self.args, self.state)):
            # keep the message; fall back to the nearest picklable class of the exception (EmbodiedError at worst)
            self.exc_type = next(c for c in type(exc).__mro__ if _picklable(c) and issubclass(c, EmbodiedError))
            self.args, self.state = (str(exc),), {}

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def rebuild(self) -> BaseException:
        """The worker's exception, as an instance of its own class (the worker traceback is logged at DEBUG)."""
        logger.debug("DataLoader worker %s raised:\n%s", self.worker_id, self.traceback)
        exc = self.exc_type.__new__(self.exc_type)
        exc.args = self.args
        exc.__dict__.update(self.state)
        return exc


def raise_if_failure(batch: Any) -> Any:
    """Returns ``batch``, or raises the worker's exception when it is a :class:`WorkerFailure`."""
    if isinstance(batch, WorkerFailure):
        raise batch.rebuild()
    return batch
