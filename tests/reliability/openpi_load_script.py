"""Load on an ``embodied serve`` from real openpi clients; runs in .venv-openpi-client (openpi-client from PyPI).

    python openpi_load_script.py PLAN.json

PLAN: ``url``, ``api_key``, ``clients`` (threads, one ``WebsocketClientPolicy`` each), ``seconds`` (each client
sends requests back to back until then: a bounded loop), ``requests`` (an .npz of arrays named ``<key>``),
``strings`` (``{key: str}``) and ``output`` (JSON written here: per-client latencies in ms and the failures).
Nothing from embodied is imported here.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import numpy as np
from openpi_client.websocket_client_policy import WebsocketClientPolicy


def _client_loop(plan: dict, request: dict, deadline: float, out: dict) -> None:
    host, port = plan["url"].removeprefix("ws://").rsplit(":", 1)
    try:
        client = WebsocketClientPolicy(host=host, port=int(port), api_key=plan["api_key"])
    except Exception as exc:  # a refused or failed connection is a failed request
        out["failures"].append(f"connect: {type(exc).__name__}: {exc}")
        return
    while time.monotonic() < deadline:
        started = time.perf_counter()
        try:
            answer = client.infer(request)
        except Exception as exc:
            out["failures"].append(f"infer: {type(exc).__name__}: {str(exc)[:300]}")
            return
        out["latencies_ms"].append((time.perf_counter() - started) * 1000)
        if answer["actions"].shape != tuple(plan["action_shape"]):
            out["failures"].append(f"actions of shape {answer['actions'].shape}")


def main() -> None:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    with np.load(plan["requests"]) as arrays:
        request = {name: arrays[name] for name in arrays.files}
    request.update(plan["strings"])
    deadline = time.monotonic() + plan["seconds"]
    results = [{"latencies_ms": [], "failures": []} for _ in range(plan["clients"])]
    threads = [threading.Thread(target=_client_loop, args=(plan, request, deadline, results[k]))
               for k in range(plan["clients"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(plan["output"], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
