"""Hostile clients against a running ``embodied serve``: the cases of the fault campaign's serve group.

Each case talks to a real server process over 127.0.0.1 and returns a :class:`Outcome` (held or not, and what
was seen); the suite runs them at a bounded size (``tests/reliability/test_serve_hostile.py``), the campaign at
full size (``python -m tests.reliability.campaign``).
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import msgpack
import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from embodied_eval.wire import pack, unpack
from tests.eval.serve_support import OPENPI_PYTHON

LOAD_SCRIPT = Path(__file__).with_name("openpi_load_script.py")


@attrs.define
class Outcome:
    """One case: ``held`` when every guarantee it checks held; ``detail`` says what was seen."""

    name: str
    held: bool
    detail: str
    figures: dict[str, Any] = attrs.field(factory=dict)


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    """File descriptors process ``pid`` holds (its sockets among them)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def client(url: str, api_key: str | None, **kwargs: Any) -> ClientConnection:
    """A raw websocket connection (metadata already read), as openpi's client opens it."""
    headers = {"Authorization": f"Api-Key {api_key}"} if api_key is not None else None
    conn = connect(url, compression=None, max_size=None, proxy=None, additional_headers=headers, open_timeout=10,
                   legacy=True, **kwargs)  # legacy=True: a connection held across calls, not a context manager
    unpack(conn.recv(timeout=10))
    return conn


def ask(conn: ClientConnection, payload: bytes | str, timeout: float = 30.0) -> Any:
    """Sends one frame; the decoded answer (a map) or the error text."""
    conn.send(payload)
    reply = conn.recv(timeout=timeout)
    return reply if isinstance(reply, str) else unpack(reply)


def _good_answer(reply: Any, action_shape: tuple[int, int]) -> bool:
    return isinstance(reply, dict) and tuple(np.asarray(reply["actions"]).shape) == action_shape


def _raw_map(entries: list[tuple[bytes, bytes]]) -> bytes:
    """A msgpack map from already-packed key and value bytes (to write what a packer refuses to: bad UTF-8)."""
    assert len(entries) < 16
    return bytes([0x80 | len(entries)]) + b"".join(k + v for k, v in entries)


def _array(data: bytes, dtype: str, shape: list[int]) -> dict[bytes, Any]:
    return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}


def hostile_frames(good: Mapping[str, Any]) -> dict[str, tuple[bytes | str, str]]:
    """``name -> (frame, text the error must contain)``: the issue's hostile inputs and their relatives."""
    packed = pack(dict(good))
    rng = random.Random(28)
    nested: dict[str, Any] = {}
    inner = nested
    for _ in range(200):
        inner["a"] = {}
        inner = inner["a"]
    image_key = next(k for k in good if k.startswith("observation.images."))
    bad_utf8_key = b"\xa2\xff\xfe"  # fixstr of 2 bytes that are not UTF-8
    return {
        "truncated msgpack": (packed[: len(packed) // 2], "not a valid msgpack message"),
        "random bytes": (rng.randbytes(4096), "bad request"),
        "2 GB declared array": (msgpack.packb({**_plain(good), image_key: _array(b"\x00" * 64, "|u1", [2**31])}),
                                "needs 2147483648 bytes"),
        "2**64-element array": (msgpack.packb({image_key: _array(b"", "|u1", [2**32, 2**32])}),
                                "needs 18446744073709551616 bytes"),
        "deeply nested maps (200)": (msgpack.packb(nested), "levels deep"),
        "deeply nested maps (5000)": (b"\x81\xa1a" * 5000 + b"\xc0", "bad request"),
        "shape/buffer mismatch": (msgpack.packb({**_plain(good), image_key: _array(b"\x00" * 100, "|u1", [64, 64, 3])}),
                                  "needs 12288 bytes, got 100"),
        "object dtype": (msgpack.packb({image_key: _array(b"\x00" * 8, "|O", [1])}), "refused numpy dtype '|O'"),
        "structured dtype": (msgpack.packb({image_key: _array(b"\x00" * 12, "i4,f8", [1])}), "plain dtypes only"),
        "dtype text numpy parses as code": (msgpack.packb({image_key: _array(b"\x00" * 8, "(,", [1])}),
                                            "plain dtypes only"),  # np.dtype("(,") raises SyntaxError
        "non-UTF-8 key": (_raw_map([(bad_utf8_key, b"\xc0")]), "not a valid msgpack message"),
        "binary key": (msgpack.packb({b"observation.state": 1}, use_bin_type=True), "keys must be strings"),
        "text frame": (json.dumps({"observation.state": [0, 0]}), "expected a binary msgpack message"),
        "5000-key map": (msgpack.packb({f"k{i}": i for i in range(5000)}), "exceeds max_map_len"),
        "top-level list": (msgpack.packb([1, 2, 3]), "expected a map of observation keys"),
        "zero-size dtype": (msgpack.packb({image_key: _array(b"", "S0", [3])}), "has no size"),
        "extension type": (msgpack.packb({"task": msgpack.ExtType(5, b"x" * 8)}), "max_ext_len"),
        "task of wrong type": (pack({**good, "task": np.zeros(3, np.float32)}), "expected the task instruction"),
        "NaN state": (pack({**good, "observation.state": np.full(2, np.nan, np.float32)}), "NaN"),
    }


def _plain(good: Mapping[str, Any]) -> dict[str, Any]:
    """``good`` as msgpack-ready values (arrays as tagged maps), to splice hand-made entries into."""
    return msgpack.unpackb(pack(dict(good)), raw=False, strict_map_key=False)


def hostile_inputs(url: str, api_key: str, good: Mapping[str, Any], action_shape: tuple[int, int]) -> list[Outcome]:
    """Each hostile frame on one connection, each followed by the good request, which must be answered."""
    conn = client(url, api_key)
    good_frame = pack(dict(good))
    outcomes = []
    try:
        for name, (frame, expected) in hostile_frames(good).items():
            reply = ask(conn, frame)
            after = ask(conn, good_frame)
            refused = isinstance(reply, str) and reply.startswith("bad request") and expected in reply
            served = _good_answer(after, action_shape)
            outcomes.append(Outcome(name, refused and served,
                                    f"reply {str(reply)[:160]!r}; next good request "
                                    f"{'answered' if served else 'NOT answered: ' + str(after)[:200]}"))
    finally:
        conn.close()
    return outcomes


def oversized_message(url: str, api_key: str, good: Mapping[str, Any], action_shape: tuple[int, int], *,
                      limit: int) -> Outcome:
    """A request over ``--max-message-bytes`` closes its connection (1009); a new one is served."""
    conn = client(url, api_key)
    code = None
    try:
        conn.send(b"\x00" * (limit + 1))
        conn.recv(timeout=10)
    except ConnectionClosed as exc:
        code = exc.rcvd.code if exc.rcvd is not None else None
    finally:
        conn.close()
    fresh = client(url, api_key)
    try:
        served = _good_answer(ask(fresh, pack(dict(good))), action_shape)
    finally:
        fresh.close()
    return Outcome("message over --max-message-bytes", code == 1009 and served,
                   f"closed with {code} (1009 expected); a new connection {'was' if served else 'was NOT'} served")


def api_key_refusals(url: str, api_key: str, good: Mapping[str, Any], action_shape: tuple[int, int], *,
                     server_log: Callable[[], str]) -> Outcome:
    """Wrong and missing keys get HTTP 401 before any frame; the log never shows a key; the right key works."""
    wrong = "wrong-" + api_key[::-1]
    statuses = []
    for key in (wrong, None, api_key + "x", ""):
        try:
            client(url, key).close()
            statuses.append(101)
        except InvalidStatus as exc:
            statuses.append(exc.response.status_code)
    conn = client(url, api_key)
    try:
        served = _good_answer(ask(conn, pack(dict(good))), action_shape)
    finally:
        conn.close()
    log = server_log()
    leaked = [k for k in (api_key, wrong, api_key + "x") if k in log]
    held = statuses == [401] * 4 and served and not leaked and "missing or wrong API key" in log
    return Outcome("--api-key", held, f"statuses {statuses} (401 x4 expected); right key served: {served}; "
                                      f"keys in the server log: {leaked or 'none'}")


def connection_limit(url: str, api_key: str, good: Mapping[str, Any], action_shape: tuple[int, int], *,
                     max_connections: int, idle_timeout_s: float) -> Outcome:
    """``max_connections`` idle clients fill the server (one more: 503); the idle timeout closes them (1001),
    after which a client is served again."""
    idle = [client(url, api_key) for _ in range(max_connections)]
    try:
        try:
            client(url, api_key).close()
            extra = 101
        except InvalidStatus as exc:
            extra = exc.response.status_code
        codes = []
        for conn in idle:
            try:
                conn.recv(timeout=idle_timeout_s + 10)
                codes.append(None)
            except ConnectionClosed as exc:
                codes.append(exc.rcvd.code if exc.rcvd is not None else None)
            except TimeoutError:
                codes.append("timeout")
    finally:
        for conn in idle:
            conn.close()
    fresh = client(url, api_key)
    try:
        served = _good_answer(ask(fresh, pack(dict(good))), action_shape)
    finally:
        fresh.close()
    held = extra == 503 and codes == [1001] * max_connections and served
    return Outcome("--max-connections and --idle-timeout", held,
                   f"connection {max_connections + 1}: HTTP {extra} (503 expected); idle ones closed with "
                   f"{sorted(set(map(str, codes)))} (1001 expected); then served: {served}")


def silent_sockets(url: str, api_key: str, good: Mapping[str, Any], action_shape: tuple[int, int], *, pid: int,
                   count: int, handshake_timeout_s: float) -> Outcome:
    """``count`` TCP connections that send nothing: a client is served meanwhile, and the server drops them after
    the handshake timeout (its file descriptors come back down)."""
    host, port = url.removeprefix("ws://").rsplit(":", 1)
    before = open_fds(pid)
    sockets = [socket.create_connection((host, int(port)), timeout=10) for _ in range(count)]
    try:
        conn = client(url, api_key)
        try:
            served = _good_answer(ask(conn, pack(dict(good))), action_shape)
        finally:
            conn.close()
        during = open_fds(pid)
        dropped = 0
        deadline = time.monotonic() + handshake_timeout_s + 15
        for sock in sockets:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                dropped += sock.recv(1) == b""
            except ConnectionResetError:  # dropped with a reset rather than a FIN
                dropped += 1
            except TimeoutError:  # still open: not dropped
                pass
    finally:
        for sock in sockets:
            sock.close()
    time.sleep(0.2)
    after = open_fds(pid)
    held = served and dropped == count and after <= before + 2
    return Outcome(f"{count} silent connections", held,
                   f"served meanwhile: {served}; dropped by the server: {dropped}/{count}; server fds "
                   f"{before} -> {during} -> {after}", {"fds": [before, during, after]})


def non_reader(url: str, api_key: str, good: Mapping[str, Any], action_shape: tuple[int, int], *, pid: int,
               requests: int, idle_timeout_s: float) -> Outcome:
    """A client that sends ``requests`` requests and never reads an answer: others are served meanwhile, the
    server's memory does not follow it, and it is closed once idle."""
    frame = pack(dict(good))
    rss_before = rss_bytes(pid)
    stuck = client(url, api_key)
    sent = 0
    try:
        for _ in range(requests):
            stuck.send(frame)
            sent += 1
        other = client(url, api_key)
        try:
            served = all(_good_answer(ask(other, frame), action_shape) for _ in range(3))
        finally:
            other.close()
        rss_during = rss_bytes(pid)
        closed = False
        deadline = time.monotonic() + idle_timeout_s + 30
        while time.monotonic() < deadline and not closed:  # its answers sit unread; then it is closed as idle
            try:
                stuck.recv(timeout=max(0.1, deadline - time.monotonic()))
            except ConnectionClosed:
                closed = True
            except TimeoutError:
                break
    finally:
        stuck.close()
    grown = rss_during - rss_before
    held = served and closed and grown < 64 * 2**20
    return Outcome("client that stops reading", held,
                   f"{sent} requests sent unread; others served: {served}; server RSS +{grown / 2**20:.1f} MiB; "
                   f"closed when idle: {closed}", {"rss_growth_mib": grown / 2**20})


def _mutate(frame: bytes, rng: random.Random, structure: list[int]) -> bytes:
    """One mutation of ``frame``: flips or overwrites bytes (mostly in the msgpack structure, not the pixels),
    truncates, inserts or duplicates a span."""
    data = bytearray(frame)
    kind = rng.random()
    if kind < 0.45:
        for _ in range(rng.randint(1, 4)):
            position = rng.choice(structure) if rng.random() < 0.9 else rng.randrange(len(data))
            data[position] = rng.randrange(256) if rng.random() < 0.5 else data[position] ^ (1 << rng.randrange(8))
    elif kind < 0.65:
        del data[rng.randrange(len(data)):]
    elif kind < 0.85:
        position = rng.choice(structure)
        data[position:position] = rng.randbytes(rng.randint(1, 16))
    else:
        start = rng.choice(structure)
        data[start:start] = data[start:start + rng.randint(1, 64)]
    return bytes(data)


def _structure_positions(good: Mapping[str, Any]) -> list[int]:
    """Byte positions of ``pack(good)`` outside the arrays' raw data and the text values (headers, keys, dtypes,
    shapes): mutating content keeps a request valid, and every valid request costs an inference."""
    frame = pack(dict(good))
    payload = [np.ascontiguousarray(v).tobytes() for v in good.values() if isinstance(v, np.ndarray)]
    payload += [v.encode() for v in good.values() if isinstance(v, str)]
    inside = set()
    for raw in payload:
        start = frame.find(raw)
        inside.update(range(start, start + len(raw)))
    return [i for i in range(len(frame)) if i not in inside]


def fuzz(url: str, api_key: str, good: Mapping[str, Any], action_shape: tuple[int, int], *, frames: int,
         seed: int = 0) -> Outcome:
    """``frames`` mutated copies of the good request: each gets an answer or a bad-request text (never an internal
    error, a hang or a dead server); connections closed for cause are reopened; the good request still works."""
    rng = random.Random(seed)
    frame = pack(dict(good))
    structure = _structure_positions(good)
    counts = {"answered": 0, "refused": 0, "closed": 0, "internal": 0}
    examples: list[str] = []
    conn = client(url, api_key)
    started = time.perf_counter()
    try:
        for _ in range(frames):
            try:
                reply = ask(conn, _mutate(frame, rng, structure), timeout=30)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
                counts["internal" if code == 1011 else "closed"] += 1
                conn = client(url, api_key)
                continue
            if isinstance(reply, dict) and "actions" in reply:
                counts["answered"] += 1
            elif isinstance(reply, str) and reply.startswith("bad request"):
                counts["refused"] += 1
            else:
                counts["internal"] += 1
                if len(examples) < 3:
                    examples.append(str(reply)[-400:])
        served = _good_answer(ask(conn, frame), action_shape)
    finally:
        conn.close()
    seconds = time.perf_counter() - started
    held = counts["internal"] == 0 and served
    return Outcome(f"fuzz ({frames} mutated frames)", held,
                   f"{counts}; good request after: {'answered' if served else 'NOT answered'}; {seconds:.1f} s"
                   + (f"; internal errors: {examples}" if examples else ""), {**counts, "seconds": seconds})


def openpi_load(url: str, api_key: str, good: Mapping[str, Any], action_shape: tuple[int, int], *, pid: int,
                clients: int, seconds: float, workdir: Path) -> Outcome:
    """``clients`` real openpi clients (their own venv) sending back to back for ``seconds``: no failed request,
    latency percentiles, and the server's RSS at the end at most 1.1 x its RSS after the first fifth."""
    arrays = {k: v for k, v in good.items() if isinstance(v, np.ndarray)}
    strings = {k: v for k, v in good.items() if isinstance(v, str)}
    np.savez(workdir / "load_request.npz", **arrays)
    plan = {"url": url, "api_key": api_key, "clients": clients, "seconds": seconds, "strings": strings,
            "requests": str(workdir / "load_request.npz"), "output": str(workdir / "load_out.json"),
            "action_shape": list(action_shape)}
    (workdir / "load_plan.json").write_text(json.dumps(plan))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        start = time.monotonic()
        while not done.wait(0.25):
            samples.append((time.monotonic() - start, rss_bytes(pid)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        run = subprocess.run([str(OPENPI_PYTHON), str(LOAD_SCRIPT), str(workdir / "load_plan.json")],
                             capture_output=True, text=True, timeout=seconds + 120, env=env)
    finally:
        done.set()
        sampler.join()
    if run.returncode != 0:
        return Outcome(f"load ({clients} openpi clients, {seconds:g} s)", False, run.stderr[-2000:])
    results = json.loads((workdir / "load_out.json").read_text())
    latencies = np.array([x for r in results for x in r["latencies_ms"]])
    failures = [f for r in results for f in r["failures"]]
    warm = [rss for t, rss in samples if t >= seconds / 5] or [rss_bytes(pid)]
    final = rss_bytes(pid)
    ratio = final / warm[0]
    figures = {"requests": int(latencies.size), "failures": len(failures),
               "p50_ms": float(np.percentile(latencies, 50)) if latencies.size else None,
               "p99_ms": float(np.percentile(latencies, 99)) if latencies.size else None,
               "rss_warm_mib": warm[0] / 2**20, "rss_final_mib": final / 2**20, "rss_ratio": ratio,
               "clients_served": sum(bool(r["latencies_ms"]) for r in results)}
    held = not failures and figures["clients_served"] == clients and ratio <= 1.1
    return Outcome(f"load ({clients} openpi clients, {seconds:g} s)", held,
                   f"{figures['requests']} requests, {len(failures)} failed{': ' + failures[0] if failures else ''}; "
                   f"p50 {figures['p50_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms; RSS after warm-up "
                   f"{figures['rss_warm_mib']:.1f} MiB -> end {figures['rss_final_mib']:.1f} MiB (x{ratio:.3f})",
                   figures)
