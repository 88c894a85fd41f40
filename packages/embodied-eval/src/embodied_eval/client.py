"""A ``Policy`` backed by a running ``embodied serve`` (or any openpi-protocol server): ``embodied eval --server``.

:meth:`RemotePolicy.reset` reconnects: a server of ours resets its policy when a client connects to it while no
other client is connected, so an evaluation through the server sees the same noise as one in process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
from websockets.exceptions import InvalidStatus, InvalidURI
from websockets.sync.client import ClientConnection, connect

from embodied_core.errors import EmbodiedError, ObservationError, UsageError
from embodied_core.protocols import PolicyMetadata
from embodied_eval.wire import pack, unpack

__all__ = ["RemotePolicy", "ServerError"]

_TUPLE_FIELDS = ("camera_keys", "image_shape", "state_names", "action_names")


class ServerError(EmbodiedError):
    """The server failed on a request (it answered with a traceback and closed the connection)."""


def metadata_from_dict(data: Mapping[str, Any], *, url: str) -> PolicyMetadata:
    """Builds :class:`PolicyMetadata` from what a server sent on connect (extra keys are ignored)."""
    names = [field.name for field in attrs.fields(PolicyMetadata)]
    missing = [name for name in names if name not in data]
    if missing:
        raise UsageError(f"{url}: the server's metadata lacks {', '.join(missing)}; is it an `embodied serve`? "
                         "(openpi's own servers send model-specific metadata that embodied eval cannot use)")
    values = {name: data[name] for name in names}
    for name in _TUPLE_FIELDS:
        if values[name] is not None:
            values[name] = tuple(values[name])
    return PolicyMetadata(**values)


class RemotePolicy:
    """Talks openpi's websocket protocol to ``url`` (``ws://host:port``).

    Args:
        url: the server.
        api_key: sent as ``Authorization: Api-Key <api_key>``.
        timeout_s: how long to wait to connect and for each answer.
    """

    def __init__(self, url: str, *, api_key: str | None = None, timeout_s: float = 60.0) -> None:
        self.url = url if url.startswith(("ws://", "wss://")) else f"ws://{url}"
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._connection, raw = self._connect()
        self.metadata = metadata_from_dict(raw, url=self.url)
        self.last_timing: dict[str, Any] = {}

    def _connect(self) -> tuple[ClientConnection, dict[str, Any]]:
        headers = {"Authorization": f"Api-Key {self._api_key}"} if self._api_key else None
        stack = contextlib.ExitStack()  # entered as a context manager: what websockets' connect() expects
        try:
            # proxy=None: a robot's server is reached directly, whatever HTTP(S)_PROXY says
            connection = stack.enter_context(connect(self.url, compression=None, max_size=None, proxy=None,
                                                     additional_headers=headers, open_timeout=self._timeout_s))
        except InvalidURI as exc:
            raise UsageError(f"--server {self.url!r} is not a websocket URL (ws://host:port)") from exc
        except InvalidStatus as exc:
            status = exc.response.status_code
            hint = "; pass the server's key with --api-key" if status == 401 else ""
            raise UsageError(f"{self.url} refused the connection with HTTP {status}{hint}") from exc
        except OSError as exc:
            raise EmbodiedError(f"cannot reach {self.url}: {exc}; is `embodied serve` running there?") from exc
        self._stack = stack
        raw = unpack(connection.recv(timeout=self._timeout_s))
        if not isinstance(raw, dict):
            raise EmbodiedError(f"{self.url}: expected a metadata map on connect, got {type(raw).__name__}")
        return connection, raw

    def predict_action(self, observation: Mapping[str, Any]) -> np.ndarray:
        """Sends one observation, returns the server's ``actions``; a bad request raises ObservationError."""
        self._connection.send(pack(dict(observation)))
        reply = self._connection.recv(timeout=self._timeout_s)
        if isinstance(reply, str):
            if reply.startswith("bad request: "):
                raise ObservationError(f"{self.url}: {reply.removeprefix('bad request: ')}")
            raise ServerError(f"{self.url} failed on a request:\n{reply}")
        answer = unpack(reply)
        self.last_timing = dict(answer.get("server_timing", {}))
        return np.asarray(answer["actions"], dtype=np.float32)

    def reset(self) -> None:
        """New episode: reconnects, so a server with no other client resets its policy."""
        self._stack.close()
        self._connection, _ = self._connect()

    def close(self) -> None:
        """Closes the connection."""
        self._stack.close()
