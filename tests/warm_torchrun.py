"""``torchrun`` for the tests, with workers forked from a warm agent instead of started as new interpreters.

``python -m tests.warm_torchrun TORCHRUN_ARGS`` is ``python -m torch.distributed.run TORCHRUN_ARGS``: the same
argument parser, rendezvous, agent, environment per worker (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``TORCHELASTIC_*``, ...), monitoring, failure reports and exit codes, since it *is* torchrun's
``main``; one thing differs: torchrun's launcher is given a Python callable instead of the command line, with
the ``fork`` start method (an option of ``torch.distributed.launcher.elastic_launch``), so each worker is a fork
of the agent. Run through ``tests/warm_cli.py``, the agent is itself a fork of a server that has imported torch,
transformers and the embodied packages, so no worker of a test launch spends seconds importing them: on the
2-core CI machine that was most of the CPU time of every distributed test.

In the worker the callable does what the interpreter would do with the command line torchrun built (``python
-u -m MODULE ARGS`` or ``python -u SCRIPT ARGS``): ``sys.argv``, ``sys.path[0]``, unbuffered stdout and
stderr, then the module or script as ``__main__``; its ``SystemExit`` code is the worker's exit code and an
uncaught exception prints its traceback and exits 1, as a new interpreter would. A worker command that is not
this Python (``--no-python``) runs through torchrun unchanged.

``TESTS_COLD_CLI=1`` (see ``tests/warm_cli.py``) makes every launch a real ``python -m torch.distributed.run``.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch.distributed.run as torchrun

MODULE = "tests.warm_torchrun"


def _as_main(program: str, *args: str) -> None:
    """In a forked worker: runs ``PROGRAM ARGS`` (this Python's ``-u -m MODULE ...`` or ``-u SCRIPT ...``)."""
    argv = list(args)
    while argv and argv[0] == "-u":
        argv.pop(0)
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(write_through=True, line_buffering=True)
    try:
        if argv[:1] == ["-m"]:
            module, rest = argv[1], argv[2:]
            sys.argv = [module, *rest]
            sys.path[0] = os.getcwd()
            sys.modules.pop(module, None)  # a new interpreter has not imported it yet
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            script, rest = argv[0], argv[1:]
            sys.argv = [script, *rest]
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    except BaseException:  # what an uncaught exception does to an interpreter: its traceback, exit code 1
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def _forking(launch: Callable[..., Any]) -> Callable[..., Any]:
    """torchrun's ``elastic_launch`` with the command line turned into a forked callable (same config)."""

    def elastic_launch(config: Any, entrypoint: Any) -> Callable[..., Any]:
        if entrypoint != sys.executable:  # --no-python: another program, started as torchrun starts it
            return launch(config=config, entrypoint=entrypoint)
        config.start_method = "fork"
        launcher = launch(config=config, entrypoint=_as_main)
        return lambda *args: launcher(entrypoint, *args)

    return elastic_launch


def main(argv: list[str] | None = None) -> None:
    """torchrun's own ``main`` over ``argv`` (default ``sys.argv[1:]``), its workers forked from this process."""
    torchrun.elastic_launch = _forking(torchrun.elastic_launch)
    torchrun.main(argv)


if __name__ == "__main__":
    main()
