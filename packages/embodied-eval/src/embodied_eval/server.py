"""``embodied serve``: a policy behind openpi's websocket protocol.

The protocol, as ``openpi_client.WebsocketClientPolicy`` speaks it:

1. The client connects (optionally with the header ``Authorization: Api-Key <key>``); the server sends one
   binary message, the policy's metadata.
2. Each request is a binary message with an observation map; the answer is a map with ``"actions"``
   (``[H, action_dim]`` float32, dataset units), ``"policy_timing"`` (``infer_ms``) and ``"server_timing"``
   (``infer_ms``, ``queue_ms``, and ``prev_total_ms`` from the second request on). See :mod:`.wire`.
3. An error is a *text* message (openpi's client raises it as ``RuntimeError``). A bad request (undecodable
   bytes, a missing/extra key, a wrong shape or dtype) gets its message and the connection stays open; an
   unexpected failure gets the traceback and the connection is closed with code 1011, as openpi's server does.
   Either way the server keeps serving everyone else.

Unlike openpi's server, inference runs in one worker thread, so the event loop keeps accepting connections
and answering pings while the model runs; requests from concurrent clients wait in that worker's queue (the
wait is ``queue_ms``). One exception: a lone client's request runs on the event loop itself when the policy's
previous answer took under ``INLINE_INFERENCE_MAX_S`` and the worker is idle. That saves the hand-off to the worker
and back (about 0.4 ms on a 2-core machine, a few percent of so short a call), and holds the loop no longer than
that answer took. ``GET /healthz`` answers ``OK`` (no key needed).

Closed-loop state: the policy is reset (new episode, noise generator reseeded) whenever a client connects to
a server with no other open connection, so a client alone sees exactly what a freshly loaded policy returns.
Concurrent clients share the policy's noise generator and closed-loop state.

Hostile clients: a request is at most ``max_message_bytes`` (larger: closed with 1009) and unfolds into at most
what :class:`~embodied_eval.wire.WireLimits` allows; at most ``max_connections`` connections are open (more: HTTP
503); a connection that sends no request for ``idle_timeout_s`` or does not take its answer within that time is
closed (1001); a TCP connection that does not finish the websocket handshake within ``handshake_timeout_s`` is
dropped. At most two frames are buffered per connection, so what requests hold in memory is bounded by
``max_connections x 2 x max_message_bytes``. The API key is compared in constant time (both sides hashed first,
so not even its length shows) and never logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import http
import logging
import signal
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from websockets.asyncio.server import Request, Response, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.protocol import State

from embodied_core.errors import UsageError
from embodied_eval.keymap import KeyMap
from embodied_eval.wire import WireError, pack, unpack

__all__ = ["PolicyServer", "describe_expected"]

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 2000
"""Longest error text sent back (and logged) for one bad request: a hostile request cannot make a large answer."""
_FRAMES_BUFFERED = 2
"""Frames websockets reads ahead per connection (a request/answer protocol needs one in flight)."""
INLINE_INFERENCE_MAX_S = 0.05
"""A lone client's request runs on the event loop when the policy's previous answer took less than this (see the
module doc); longer inferences, the first request, and requests while several connections are open go to the
inference thread."""


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest()


def _truncated(text: str) -> str:
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}... ({len(text) - MAX_ERROR_CHARS} more characters)"


def describe_expected(metadata: Any) -> str:
    """What a request must hold, e.g. ``observation.images.front uint8 (96, 96, 3), observation.state [2], task``."""
    height, width, channels = metadata.image_shape
    parts = [f"{key} uint8 ({height}, {width}, {channels}) or ({channels}, {height}, {width})"
             for key in metadata.camera_keys]
    parts.append(f"{metadata.state_key} float [{metadata.state_dim}]")
    if metadata.needs_task:
        parts.append("task str")
    return ", ".join(parts)


class PolicyServer:
    """Serves one policy to any number of websocket clients.

    Args:
        policy: an ``embodied_core.protocols.Policy``.
        host: interface to listen on.
        port: TCP port; 0 picks a free one (see :attr:`port` once started).
        api_key: when set, a connection must send ``Authorization: Api-Key <api_key>`` (else HTTP 401).
        key_map: renames client keys to the policy's LeRobot keys.
        max_message_bytes: largest request accepted (larger ones close the connection with 1009).
        max_connections: open websocket connections at most; one more is refused with HTTP 503.
        idle_timeout_s: a connection without a request for this long, or whose client does not take an answer
            within this time, is closed (code 1001); None never closes idle connections.
        handshake_timeout_s: a TCP connection must complete the websocket handshake within this time.
    """

    def __init__(self, policy: Any, *, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
                 key_map: KeyMap | None = None, max_message_bytes: int = 64 * 2**20, max_connections: int = 64,
                 idle_timeout_s: float | None = 600.0, handshake_timeout_s: float = 10.0) -> None:
        for name, value in (("max_message_bytes", max_message_bytes), ("max_connections", max_connections),
                            ("handshake_timeout_s", handshake_timeout_s),
                            ("idle_timeout_s", 1 if idle_timeout_s is None else idle_timeout_s)):
            if value <= 0:
                raise UsageError(f"PolicyServer {name} must be > 0 (got {value})")
        if api_key is not None and not api_key.strip():
            raise UsageError("--api-key is empty; give a key or leave the flag out")
        self.policy = policy
        self.host = host
        self.port = port
        self.key_map = key_map or KeyMap()
        self.key_map.check_targets([*policy.metadata.camera_keys, policy.metadata.state_key, "task"])
        self._key_digest = None if api_key is None else _digest(f"Api-Key {api_key}")
        self._max_message_bytes = max_message_bytes
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self._handshake_timeout_s = handshake_timeout_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embodied-inference")
        self._last_submitted: Future[Any] | None = None  # the executor runs in order: once done, it is idle
        self._last_infer_s: float | None = None
        self._connections: set[ServerConnection] = set()
        self._admitted: set[ServerConnection] = set()  # past process_request: counted against max_connections
        self.metadata: dict[str, Any] = {**policy.metadata.to_dict(), "obs_key_map": dict(self.key_map.pairs)}

    # ------------------------------------------------------------------------------------------ lifecycle
    def serve_forever(self, *, on_ready: Callable[[PolicyServer], None] | None = None) -> None:
        """Runs until SIGTERM or SIGINT, then closes every connection (code 1001) and returns."""
        asyncio.run(self._serve_until_signal(on_ready))

    async def _serve_until_signal(self, on_ready: Callable[[PolicyServer], None] | None) -> None:
        loop = asyncio.get_running_loop()
        stop: asyncio.Future[int] = loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda s=sig: stop.done() or stop.set_result(s))
        received = await self.serve(stop, on_ready=on_ready)
        logger.info("received %s; closed every connection", signal.Signals(received).name)

    async def serve(self, stop: asyncio.Future[Any], *,
                    on_ready: Callable[[PolicyServer], None] | None = None) -> Any:
        """Serves until ``stop`` resolves; returns its result. Closing waits for a running inference."""
        try:
            async with serve(self._handle, self.host, self.port, compression=None,
                             max_size=self._max_message_bytes, max_queue=_FRAMES_BUFFERED,
                             open_timeout=self._handshake_timeout_s,
                             process_request=self._process_request) as server:
                self.port = next(iter(server.sockets)).getsockname()[1]
                if on_ready is not None:
                    on_ready(self)
                return await stop
        finally:
            self._executor.shutdown(wait=True)

    @property
    def requires_api_key(self) -> bool:
        """Whether connections must send the ``Authorization: Api-Key`` header."""
        return self._key_digest is not None

    @property
    def url(self) -> str:
        """``ws://host:port`` (the real port once serving)."""
        return f"ws://{self.host}:{self.port}"

    # ------------------------------------------------------------------------------------------ handshake
    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self._key_digest is not None:
            # sha256 of both sides: compare_digest then runs over equal lengths, whatever the client sent
            sent = _digest(request.headers.get("Authorization", ""))
            if not hmac.compare_digest(sent, self._key_digest):
                logger.warning("refused %s: missing or wrong API key", connection.remote_address)
                return connection.respond(http.HTTPStatus.UNAUTHORIZED,
                                          "this server needs the header 'Authorization: Api-Key <key>'\n")
        # connections whose handshake failed after this point are closed by websockets: they stop counting
        self._admitted = {c for c in self._admitted if c.state is not State.CLOSED}
        if len(self._admitted) >= self.max_connections:
            logger.warning("refused %s: %d connections open (--max-connections %d)", connection.remote_address,
                           len(self._admitted), self.max_connections)
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE,
                                      f"server full: {len(self._admitted)} connections open "
                                      f"(--max-connections {self.max_connections}); retry later\n")
        self._admitted.add(connection)
        return None

    # ------------------------------------------------------------------------------------------ requests
    async def _handle(self, websocket: ServerConnection) -> None:
        peer = websocket.remote_address
        # A client that closed has its close handshake done before it can reconnect, so CLOSING/CLOSED
        # connections (whose handlers may still be finishing) do not count as other clients.
        alone = not any(c.state is State.OPEN for c in self._connections)
        self._connections.add(websocket)
        try:
            if alone:
                await self._on_inference_thread(self.policy.reset)
            logger.info("connection from %s opened", peer)
            if not await self._send(websocket, pack(self.metadata)):
                return
            previous_total_s: float | None = None
            while True:
                try:
                    message = await asyncio.wait_for(websocket.recv(), self.idle_timeout_s)
                except TimeoutError:
                    logger.info("closing %s: no request for %g s (--idle-timeout)", peer, self.idle_timeout_s)
                    await websocket.close(CloseCode.GOING_AWAY, f"idle for {self.idle_timeout_s:g} s")
                    return
                started = time.monotonic()
                reply = await self._answer(message, previous_total_s)
                if not await self._send(websocket, reply):
                    return
                previous_total_s = time.monotonic() - started
        except ConnectionClosed:
            pass  # the client left, possibly mid-request: its answer is dropped, nothing else changes
        except Exception:
            logger.exception("request from %s failed; closing that connection", peer)
            try:
                await self._send(websocket, _truncated(traceback.format_exc()))
                await websocket.close(CloseCode.INTERNAL_ERROR, "internal server error; traceback in previous frame")
            except ConnectionClosed:
                pass
        finally:
            self._connections.discard(websocket)
            self._admitted.discard(websocket)
            logger.info("connection from %s closed", peer)

    async def _send(self, websocket: ServerConnection, reply: bytes | str) -> bool:
        """Sends ``reply``; False (connection closed) when the client does not take it within the idle timeout."""
        try:
            await asyncio.wait_for(websocket.send(reply), self.idle_timeout_s)
        except TimeoutError:
            logger.info("closing %s: it took no answer for %g s (--idle-timeout)", websocket.remote_address,
                        self.idle_timeout_s)
            websocket.transport.abort()  # a close frame would queue behind the answer it does not read
            return False
        return True

    async def _answer(self, message: bytes | str, previous_total_s: float | None) -> bytes | str:
        """The reply to one request: packed actions and timing, or an error text for a bad request."""
        try:
            observation = self._decode(message)
        except (WireError, UsageError) as exc:
            return self._bad_request(exc)
        submitted = time.monotonic()
        try:
            if self._runs_inline():
                actions, queue_s, infer_s = self._infer(observation, submitted)
            else:
                actions, queue_s, infer_s = await self._on_inference_thread(self._infer, observation, submitted)
        except UsageError as exc:  # ObservationError: the policy names the key and what it expects
            return self._bad_request(exc)
        server_timing = {"infer_ms": infer_s * 1000, "queue_ms": queue_s * 1000}
        if previous_total_s is not None:
            server_timing["prev_total_ms"] = previous_total_s * 1000
        return pack({"actions": actions, "policy_timing": {"infer_ms": infer_s * 1000},
                     "server_timing": server_timing})

    async def _on_inference_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the inference thread, in submission order."""
        self._last_submitted = future = self._executor.submit(fn, *args)
        return await asyncio.wrap_future(future)

    def _runs_inline(self) -> bool:
        """Whether the next request runs on the event loop (see the module doc): one open connection, the inference
        thread idle (even a request whose client left is finished), and a previous answer under
        ``INLINE_INFERENCE_MAX_S``."""
        return (self._last_infer_s is not None and self._last_infer_s < INLINE_INFERENCE_MAX_S
                and (self._last_submitted is None or self._last_submitted.done())
                and sum(c.state is State.OPEN for c in self._connections) <= 1)

    def _decode(self, message: bytes | str) -> dict[str, Any]:
        if isinstance(message, str):
            raise WireError("expected a binary msgpack message, got a text frame")
        observation = unpack(message)
        if not isinstance(observation, Mapping):
            raise WireError(f"expected a map of observation keys, got {type(observation).__name__}; "
                            f"send {describe_expected(self.policy.metadata)}")
        return self.key_map.apply(observation)

    def _infer(self, observation: dict[str, Any], submitted: float) -> tuple[np.ndarray, float, float]:
        started = time.monotonic()
        actions = np.asarray(self.policy.predict_action(observation), dtype=np.float32)
        self._last_infer_s = infer_s = time.monotonic() - started
        return actions, started - submitted, infer_s

    def _bad_request(self, exc: Exception) -> str:
        text = f"bad request: {exc}"
        mapped = [f"{source!r} -> {target!r}" for source, target in self.key_map.pairs.items() if repr(target) in text]
        if mapped:
            text += f" (client keys mapped by --obs-key-map: {', '.join(mapped)})"
        text = _truncated(text) + f"\nexpected: {describe_expected(self.policy.metadata)}"
        logger.info("%s", text.replace("\n", "; "))
        return text
