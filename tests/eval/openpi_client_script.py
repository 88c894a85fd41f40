"""Runs in .venv-openpi-client (the real ``openpi-client`` from PyPI, numpy<2) against an ``embodied serve``.

    python openpi_client_script.py PLAN.json

PLAN holds ``url``, ``api_key``, ``scenario``, ``requests`` (an .npz of arrays named ``r<i>|<key>``), ``strings``
(``{"r<i>|<key>": str}``) and ``output`` (an .npz written here, plus ``output``.json for the non-array facts).
Scenarios: ``actions`` (each request in order on one connection), ``bad`` (each request, then ``good`` on the
same connection), ``concurrent`` (two clients send every request at the same moment), ``drop`` (a raw connection
sends a request and closes before the answer; then a fresh client is served), ``nokey`` (connect without key).
Nothing from embodied is imported here.
"""

from __future__ import annotations

import json
import sys
import threading

import numpy as np
import websockets.sync.client
from openpi_client import msgpack_numpy
from openpi_client.websocket_client_policy import WebsocketClientPolicy


def _requests(plan: dict) -> list[dict]:
    arrays = np.load(plan["requests"]) if plan.get("requests") else {}
    out: dict[int, dict] = {}
    for name, value in [*((n, arrays[n]) for n in getattr(arrays, "files", [])), *plan["strings"].items()]:
        index, key = name.split("|", 1)
        out.setdefault(int(index[1:]), {})[key] = value
    return [out[i] for i in sorted(out)]


def _client(plan: dict) -> WebsocketClientPolicy:
    host, port = plan["url"].removeprefix("ws://").rsplit(":", 1)
    return WebsocketClientPolicy(host=host, port=int(port), api_key=plan["api_key"])


def actions(plan: dict, requests: list[dict]) -> tuple[dict, dict]:
    client = _client(plan)
    arrays, timings = {}, []
    for i, request in enumerate(requests):
        answer = client.infer(request)
        arrays[f"a{i}"] = answer["actions"]
        timings.append({"server_timing": answer["server_timing"], "policy_timing": answer["policy_timing"],
                        "keys": sorted(answer)})
    return arrays, {"metadata": client.get_server_metadata(), "timings": timings}


def bad(plan: dict, requests: list[dict]) -> tuple[dict, dict]:
    client = _client(plan)
    good, *bad_requests = requests
    errors, recovered = [], []
    for request in bad_requests:
        try:
            client.infer(request)
            errors.append(None)
        except RuntimeError as exc:
            errors.append(str(exc))
        recovered.append(list(client.infer(good)["actions"].shape))
    return {}, {"errors": errors, "recovered_shapes": recovered}


def concurrent(plan: dict, requests: list[dict]) -> tuple[dict, dict]:
    clients = [_client(plan), _client(plan)]
    barrier = threading.Barrier(2)
    results: list[list[dict]] = [[], []]

    def run(k: int) -> None:
        for request in requests:
            barrier.wait()
            answer = clients[k].infer(request)
            results[k].append({"shape": list(answer["actions"].shape), "server_timing": answer["server_timing"]})

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {}, {"results": results}


def drop(plan: dict, requests: list[dict]) -> tuple[dict, dict]:
    headers = {"Authorization": f"Api-Key {plan['api_key']}"}
    for request in requests:  # each: send, then hang up without reading the answer
        raw = websockets.sync.client.connect(plan["url"], compression=None, max_size=None, additional_headers=headers)
        raw.recv()  # metadata
        raw.send(msgpack_numpy.packb(request))
        raw.close()
    client = _client(plan)
    answer = client.infer(requests[0])
    return {"after": answer["actions"]}, {"served_after_drop": True}


def nokey(plan: dict, requests: list[dict]) -> tuple[dict, dict]:
    try:
        WebsocketClientPolicy(host=plan["url"], api_key=None)
    except Exception as exc:  # websockets' InvalidStatus for HTTP 401
        status = getattr(getattr(exc, "response", None), "status_code", None)
        return {}, {"refused": True, "error": type(exc).__name__, "status": status}
    return {}, {"refused": False}


def main() -> None:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    arrays, facts = globals()[plan["scenario"]](plan, _requests(plan))
    np.savez(plan["output"], **arrays)
    with open(plan["output"] + ".json", "w") as f:
        json.dump(facts, f)


if __name__ == "__main__":
    main()
