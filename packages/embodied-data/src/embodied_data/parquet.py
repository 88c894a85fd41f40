"""Reading parquet files with errors that name the file.

pyarrow reports a truncated or corrupt file as ``ArrowInvalid`` / ``OSError`` without saying which file it was
reading; these helpers turn every such failure into a :class:`~embodied_core.errors.DataError` naming the path,
so a damaged dataset file ends a run with one line instead of a pyarrow traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embodied_core.errors import DataError

__all__ = ["open_parquet", "read_schema", "read_table"]


def _unreadable(path: Path, exc: BaseException) -> DataError:
    if isinstance(exc, FileNotFoundError):
        return DataError(f"{path}: parquet file is missing")
    return DataError(f"{path}: unreadable parquet file ({type(exc).__name__}: {exc}); the file is truncated or "
                     "corrupt, re-download or rewrite it")


def _errors() -> tuple[type[BaseException], ...]:
    import pyarrow as pa

    return (pa.ArrowException, OSError)


def open_parquet(path: str | Path) -> Any:
    """A ``pyarrow.parquet.ParquetFile`` (footer read: schema, row counts); DataError when unreadable."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except _errors() as exc:
        raise _unreadable(Path(path), exc) from None


def read_schema(path: str | Path) -> Any:
    """The file's arrow schema; DataError naming ``path`` when the file is missing, truncated or corrupt."""
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(path)
    except _errors() as exc:
        raise _unreadable(Path(path), exc) from None


def read_table(path: str | Path, *, columns: Sequence[str] | None = None) -> Any:
    """The file's rows (``columns`` only, when given) as an arrow table; DataError naming ``path`` on failure."""
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path, columns=list(columns) if columns is not None else None)
    except _errors() as exc:
        raise _unreadable(Path(path), exc) from None
