"""Where ``PolicyServer`` runs inference: on the event loop for a lone client whose policy answers fast, on the
inference thread otherwise (the first request, a slow policy, several open connections). A real pi05_tiny policy
behind a real server on 127.0.0.1, our websocket client; the wrapper only records the thread each call ran on."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import embodied_eval.server
from embodied_core import load_policy
from embodied_eval import RemotePolicy
from embodied_eval.server import INLINE_INFERENCE_MAX_S, PolicyServer
from tests.eval.serve_support import dataset_observations

LOOP_THREAD = "server-loop"
INFERENCE_THREAD = "embodied-inference_0"


class _Recording:
    """A policy that notes the thread of each ``predict_action`` and, with ``delay_s``, answers that much later."""

    def __init__(self, policy: Any, delay_s: float = 0.0) -> None:
        self.policy = policy
        self.metadata = policy.metadata
        self.delay_s = delay_s
        self.threads: list[str] = []

    def reset(self) -> None:
        self.policy.reset()

    def predict_action(self, observation: dict[str, Any]) -> np.ndarray:
        self.threads.append(threading.current_thread().name)
        time.sleep(self.delay_s)
        return self.policy.predict_action(observation)


@contextlib.contextmanager
def _serving(policy: Any) -> Iterator[str]:
    """The server on a free port, its event loop on a thread named ``server-loop``; yields its URL."""
    server = PolicyServer(policy, port=0)
    loop = asyncio.new_event_loop()
    stop = loop.create_future()
    ready = threading.Event()
    serving = server.serve(stop, on_ready=lambda _: ready.set())
    thread = threading.Thread(target=lambda: loop.run_until_complete(serving), name=LOOP_THREAD)
    thread.start()
    try:
        assert ready.wait(60), "the server did not start"
        yield server.url
    finally:
        loop.call_soon_threadsafe(stop.set_result, None)
        thread.join(60)
        loop.close()


@pytest.fixture(scope="module")
def observations(synth_dataset):
    return dataset_observations(synth_dataset, [0, 5, 30, 61])


@pytest.fixture
def fast_enough(monkeypatch):
    """A bound pi05_tiny stays under even on a loaded machine (it answers in ~20 ms), so that what is tested is the
    rule, not this machine's speed."""
    monkeypatch.setattr(embodied_eval.server, "INLINE_INFERENCE_MAX_S", 1.0)


def test_a_lone_clients_fast_requests_run_on_the_event_loop_with_the_same_actions(checkpoint, observations,
                                                                                  fast_enough):
    policy = _Recording(load_policy(checkpoint))
    with _serving(policy) as url:
        client = RemotePolicy(url)
        served = [client.predict_action(obs) for obs in observations]
        client.close()
    # the first request has no earlier answer to go by
    assert policy.threads == [INFERENCE_THREAD] + [LOOP_THREAD] * (len(observations) - 1)
    direct = load_policy(checkpoint)
    direct.reset()
    for obs, actions in zip(observations, served, strict=True):
        np.testing.assert_array_equal(actions, direct.predict_action(obs))


def test_a_slow_policy_stays_on_the_inference_thread(checkpoint, observations):
    policy = _Recording(load_policy(checkpoint), delay_s=INLINE_INFERENCE_MAX_S + 0.01)
    with _serving(policy) as url:
        client = RemotePolicy(url)
        for obs in observations[:3]:
            client.predict_action(obs)
        client.close()
    assert policy.threads == [INFERENCE_THREAD] * 3


def test_while_two_clients_are_connected_every_request_goes_to_the_inference_thread(checkpoint, observations,
                                                                                    fast_enough):
    policy = _Recording(load_policy(checkpoint))
    with _serving(policy) as url:
        first = RemotePolicy(url)
        first.predict_action(observations[0])
        first.predict_action(observations[1])  # alone and fast: on the loop
        second = RemotePolicy(url)
        first.predict_action(observations[2])
        second.predict_action(observations[0])
        second.close()
        deadline = time.monotonic() + 10  # the server sees the close handshake end, then first is alone again
        while policy.threads[-1] != LOOP_THREAD and time.monotonic() < deadline:
            first.predict_action(observations[3])
        first.close()
    assert policy.threads[:4] == [INFERENCE_THREAD, LOOP_THREAD, INFERENCE_THREAD, INFERENCE_THREAD]
    assert policy.threads[-1] == LOOP_THREAD
