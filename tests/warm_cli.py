"""A warm interpreter for the CLI tests: ``embodied ...`` runs in a fork of a process that already imported torch.

Most CLI tests start ``python -m embodied_core.cli.main`` and spend most of their time importing torch,
transformers and the embodied packages (about 3 s of CPU each on the 2-core CI machine). This module keeps one
server process per set of import-time settings that has imported them; each command runs in a *fork* of it,
so it gets a fresh process (own memory, exit code, signals, ``atexit``, file descriptors) that only skipped
the imports. The child sets up what a new interpreter would see: the command's arguments, environment, working
directory, ``sys.path`` (its cwd and ``PYTHONPATH``), stdin on /dev/null, stdout/stderr to files, fresh numpy
RNG state; it then runs the module as ``__main__`` and exits as a process does (threads joined, ``atexit``,
flushes, the exit code) without tearing down the inherited modules one by one.

What cannot be replayed after the imports is never faked:
- environment variables read while importing (``OMP_*``, ``TORCH*``, ``HF_*``, ``PYTHON*`` other than
  ``PYTHONPATH``, ...): their values are part of a server's key, so a command with other values gets (or
  starts) another server;
- installed packages: a server is replaced when the ``site-packages`` listing changes (a test that installs or
  uninstalls a distribution; ``.pth`` files of editable installs are read only at start-up);
- another interpreter (``python=``): a plain subprocess.

``TESTS_COLD_CLI=1`` turns it off (every command a real ``subprocess.run``).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

MODULE = "embodied_core.cli.main"
PRELOAD = ("numpy", "torch", "safetensors.torch", "attrs", "cattrs", "yaml", "tyro", "rich", "transformers",
           "embodied_core.cli.main", "embodied_core.cli.train", "embodied_core.trainer.api",
           # every training run plots loss_curve.png at its end (0.8 s of imports)
           "matplotlib.figure", "matplotlib.backends.backend_agg",
           # distributed launches (tests/warm_torchrun.py): the agent, and what every FSDP/DCP worker imports
           "torch.distributed.run", "torch.distributed.fsdp", "torch.distributed.tensor",
           "torch.distributed.checkpoint",
           # what every model plugin built on transformers imports (its PreTrainedModel machinery)
           "transformers.modeling_utils",
           # the video and world models' diffusers blocks (diffusers' transformers package imports all of its
           # ~100 models at once: 4-7 s per command on the CI machine)
           "diffusers.models.modeling_utils", "diffusers.models.transformers",
           # the default video backend, which every run on a video dataset imports (FFmpeg's libraries: 1.7 s)
           "torchcodec.decoders")
"""Imported once by each server (import-time side effects only: nothing is discovered, built or seeded)."""

_IMPORT_TIME_PREFIXES = ("OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS", "TORCH", "PYTORCH", "CUDA", "NCCL", "HF_",
                         "TRANSFORMERS", "TOKENIZERS", "MPL", "PYTHON", "LD_", "MALLOC", "LC_", "LANG", "TZ")
"""Environment variables that libraries may read while being imported (so a server fixes their values)."""


_READ_LATER = ("PYTHONPATH", "PYTORCH_CUDA_ALLOC_CONF")
"""Matched by a prefix above but read after the imports (sys.path is set per command; the CUDA allocator reads its
settings when it first allocates, which no server does): the recipes export PYTORCH_CUDA_ALLOC_CONF."""


def _import_time_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items()
                        if k.startswith(_IMPORT_TIME_PREFIXES) and k not in _READ_LATER))


def _site_listing() -> tuple[str, ...]:
    """Names and mtimes of what site-packages holds (a change means an install or uninstall)."""
    entries = []
    for folder in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        with os.scandir(folder) as it:
            entries.extend(f"{e.name}:{e.stat(follow_symlinks=False).st_mtime_ns}" for e in it)
    return tuple(sorted(entries))


# ------------------------------------------------------------------------------------------------ server side
def _recv_json(conn: socket.socket, data: bytes = b"") -> dict[str, Any]:
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("client went away")
        data += chunk
    return json.loads(data)


def _recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """A request, and the client's stdin/stdout/stderr when it sent them (``tests/bin/torchrun``: b"F" + fds)."""
    first, fds, _, _ = socket.recv_fds(conn, 1, 3)
    if not first:
        raise ConnectionError("client went away")
    return _recv_json(conn, b"" if first == b"F" else first), list(fds)


def _become_command(request: dict[str, Any], server_path: list[str], stdio: list[int]) -> None:
    """In the forked child: what a new ``python -m MODULE ARGS`` process would see."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if stdio:  # the client's own streams
        for fd, received in enumerate(stdio):
            os.dup2(received, fd)
            os.close(received)
    else:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_TRUNC)
            os.dup2(out, fd)
            os.close(out)
    python_path = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *python_path, *server_path]
    sys.argv = [request["module"], *request["argv"]]
    import importlib

    importlib.invalidate_caches()
    import numpy as np

    np.random.seed()  # a new process draws a new global numpy state (``random`` reseeds itself after fork)


_SERVER_KEY: list[tuple[tuple[str, str], ...]] = []
"""The import-time settings this server imported under (a request that names them must match)."""
_BASE_PATH: list[str] = []
"""The server's ``sys.path`` without its script folder and its PYTHONPATH (what every command starts from)."""


def serve(listen_path: str) -> None:
    """Imports :data:`PRELOAD`, then runs each request in a fork until stdin closes (the test process ended)."""
    import importlib

    _BASE_PATH[:] = [p for p in sys.path[1:] if p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    _SERVER_KEY[:] = [_import_time_key(dict(os.environ))]
    for name in PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(listen_path)
    listener.listen(4)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    running: dict[int, socket.socket] = {}  # child pid -> its client's connection (commands run concurrently)
    while True:
        readable, _, _ = select.select([listener, sys.stdin, *running.values()], [], [], 0.05 if running else None)
        _reap(running)
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            return  # the test process closed our stdin: it is gone
        for pid, conn in list(running.items()):
            if conn in readable and not conn.recv(1):  # its client is gone (killed, or its test ended)
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
        if listener in readable:
            conn, _ = listener.accept()
            try:
                _start_request(conn, listener, running)
            except (OSError, ValueError):
                conn.close()  # the client went away before its command started: serve the next one


def _reap(running: dict[int, socket.socket]) -> None:
    """Sends each ended child's exit code to its client (the client kills the child on its timeout)."""
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        conn = running.pop(pid, None)
        if conn is None:
            continue
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        conn.close()


def _run_child(request: dict[str, Any], conn: socket.socket, listener: socket.socket, stdio: list[int]) -> None:
    """The forked child: becomes the command, then exits as a real process does (non-daemon threads joined,
    ``atexit`` handlers run, streams flushed, the exit code of its SystemExit or 1 after an uncaught exception's
    traceback) but without tearing down the modules it inherited (seconds of freeing torch for nothing); never
    returns to the server loop."""
    listener.close()
    conn.close()
    try:
        if request["session"]:
            os.setsid()  # its own process group: a timeout kills it and every process it started
        _become_command(request, _BASE_PATH, stdio)
        import runpy

        # A real ``python -m`` has not imported the module yet (else runpy warns on stderr).
        sys.modules.pop(request["module"], None)
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # what an uncaught exception does to a real process: traceback, exit code 1
        import traceback

        traceback.print_exc()
        code = 1
    _shutdown_and_exit(code)


def _exit_code(value: object) -> int:
    """The process exit code of ``SystemExit(value)`` (None: 0; a message: printed, 1)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _shutdown_and_exit(code: int) -> None:
    import atexit
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a stream the command closed
            stream.flush()
    os._exit(code)


def _start_request(conn: socket.socket, listener: socket.socket, running: dict[int, socket.socket]) -> None:
    request, stdio = _recv_request(conn)
    if request.get("import_time_key") is not None and _import_time_key(request["env"]) != _SERVER_KEY[0]:
        # started with other import-time settings than this server imported under: the client runs it cold
        conn.sendall(json.dumps({"refused": "import-time environment differs"}).encode() + b"\n")
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for other in running.values():
            other.close()
        _run_child(request, conn, listener, stdio)
    for fd in stdio:
        os.close(fd)
    running[pid] = conn
    with contextlib.suppress(OSError):  # a client gone already: the child is still reaped
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


# ------------------------------------------------------------------------------------------------ client side
class _Server:
    """One warm server process and the site-packages listing it was started with."""

    def __init__(self, env: dict[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="warm_cli_")
        self.socket_path = os.path.join(self.folder, "socket")
        self.site = _site_listing()
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), self.socket_path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=self.folder)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"the warm CLI server did not start (exit {self.proc.wait()})")

    def alive(self) -> bool:
        return self.proc.poll() is None and _site_listing() == self.site

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def run(self, argv: list[str], *, env: dict[str, str], cwd: str, timeout: float, cmd: list[str],
            module: str = MODULE, session: bool = False) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="warm_cli_run_") as tmp:
            paths = {name: os.path.join(tmp, name) for name in ("stdout", "stderr")}
            for path in paths.values():
                Path(path).touch()
            request = {"module": module, "argv": argv, "env": env, "cwd": cwd, "session": session, **paths}
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(self.socket_path)
                conn.sendall(json.dumps(request).encode() + b"\n")
                conn.settimeout(60)  # the fork itself
                pid = _recv_json(conn)["pid"]
                conn.settimeout(timeout)
                try:
                    code = _recv_json(conn)["returncode"]
                except TimeoutError:
                    if session:
                        os.killpg(pid, signal.SIGKILL)
                    else:
                        os.kill(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired(cmd, timeout, output=Path(paths["stdout"]).read_text(),
                                                    stderr=Path(paths["stderr"]).read_text()) from None
            out, err = (Path(paths[n]).read_text(errors="replace") for n in ("stdout", "stderr"))
        return subprocess.CompletedProcess(cmd, code, out, err)


_SERVERS: dict[tuple[tuple[str, str], ...], _Server] = {}


def _close_all() -> None:
    for server in _SERVERS.values():
        server.close()
    _SERVERS.clear()


atexit.register(_close_all)


def _server(env: dict[str, str]) -> _Server:
    """The live warm server for ``env``'s import-time settings (started when there is none)."""
    key = _import_time_key(env)
    server = _SERVERS.get(key)
    if server is None or not server.alive():
        if server is not None:
            server.close()
        server = _SERVERS[key] = _Server(env)
    return server


def torchrun_shim_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a command that runs ``torchrun`` from its PATH (a recipe script): ``tests/bin/torchrun`` first
    on PATH, which launches in a fork of the warm server for ``env`` (with ``TESTS_COLD_CLI=1``: this Python's
    real ``python -m torch.distributed.run``)."""
    shim = str(Path(__file__).resolve().parent / "bin")
    # TORCHRUN: for a recipe that puts its checkout's .venv/bin first on PATH (examples/lingbot_va/train.sh)
    env = {**env, "PATH": os.pathsep.join([shim, env.get("PATH", os.defpath)]), "WARM_TESTS_PYTHON": sys.executable,
           "TORCHRUN": os.path.join(shim, "torchrun")}
    if os.environ.get("TESTS_COLD_CLI") != "1":
        env["WARM_TESTS_SOCKET"] = _server(env).socket_path
    return env


def run_module(argv: list[str], *, env: dict[str, str], cwd: str | None, timeout: float,
               python: str | None, module: str = MODULE, cold_module: str | None = None,
               session: bool = False) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGV`` (default the ``embodied`` CLI) with ``env`` in ``cwd``, as
    ``subprocess.run(capture_output=True, text=True)`` returns it: in a fork of a warm server when possible, else
    as a real subprocess of ``cold_module`` (default ``module``). ``session``: the command leads its own process
    group, killed whole on a timeout."""
    cmd = [python or sys.executable, "-m", module, *argv]
    if os.environ.get("TESTS_COLD_CLI") == "1" or (python is not None and python != sys.executable):
        cold = [python or sys.executable, "-m", cold_module or module, *argv]
        return _run_cold(cold, env=env, cwd=cwd, timeout=timeout, session=session)
    return _server(env).run(argv, env=env, cwd=os.path.abspath(cwd or os.getcwd()), timeout=timeout, cmd=cmd,
                      module=module, session=session)


def _run_cold(cmd: list[str], *, env: dict[str, str], cwd: str | None, timeout: float,
              session: bool) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(cmd, capture_output=True, text=True)``; with ``session`` a timeout kills its whole group."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=session)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        if session:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


if __name__ == "__main__":
    serve(sys.argv[1])
