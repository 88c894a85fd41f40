"""``embodied serve`` (a real process, a real pi05_tiny policy) under hostile clients, at a bounded size: every
hostile frame of issue 28 followed by a normal request, the limits (--max-message-bytes, --max-connections,
--idle-timeout, --handshake-timeout), the API key (refused before any frame, never logged), 200 silent TCP
connections, a client that stops reading, 2,000 fuzzed frames and a short load of real openpi clients.
The full-size runs are in ``python -m tests.reliability.campaign``."""

from __future__ import annotations

import pytest

from tests.eval.serve_support import ServeProcess, dataset_observations
from tests.reliability import serve_cases as cases
from tests.support import run_embodied

API_KEY = "h28-secret-Zq9"
MAX_MESSAGE = 400_000
MAX_CONNECTIONS = 6
IDLE_S = 2.0
HANDSHAKE_S = 1.0
ACTIONS = (10, 2)


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    key_file = tmp_path_factory.mktemp("serve_key") / "key.txt"
    key_file.write_text(API_KEY + "\n")
    proc = ServeProcess(str(checkpoint), "--api-key-file", str(key_file), "--max-message-bytes", str(MAX_MESSAGE),
                        "--max-connections", str(MAX_CONNECTIONS), "--idle-timeout", str(IDLE_S),
                        "--handshake-timeout", str(HANDSHAKE_S))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def good(synth_dataset):
    return dataset_observations(synth_dataset, [3])[0]


def _log(server: ServeProcess) -> str:
    return "\n".join(server.banner) + "".join(server._errors)


def _check(outcome: cases.Outcome) -> None:
    assert outcome.held, f"{outcome.name}: {outcome.detail}"


def test_each_hostile_frame_is_refused_and_the_next_request_is_served(server, good):
    outcomes = cases.hostile_inputs(server.url, API_KEY, good, ACTIONS)
    failed = [f"{o.name}: {o.detail}" for o in outcomes if not o.held]
    assert not failed, "\n".join(failed)
    assert len(outcomes) == len(cases.hostile_frames(good)) and server.proc.poll() is None


def test_a_message_over_the_limit_closes_its_connection_only(server, good):
    _check(cases.oversized_message(server.url, API_KEY, good, ACTIONS, limit=MAX_MESSAGE))


def test_wrong_or_missing_keys_get_401_and_no_key_is_ever_logged(server, good):
    _check(cases.api_key_refusals(server.url, API_KEY, good, ACTIONS, server_log=lambda: _log(server)))
    assert "Api-Key header required" in _log(server)


def test_connection_limit_then_idle_timeout_frees_the_slots(server, good):
    _check(cases.connection_limit(server.url, API_KEY, good, ACTIONS, max_connections=MAX_CONNECTIONS,
                                  idle_timeout_s=IDLE_S))


def test_200_silent_tcp_connections_are_dropped_after_the_handshake_timeout(server, good):
    _check(cases.silent_sockets(server.url, API_KEY, good, ACTIONS, pid=server.proc.pid, count=200,
                                handshake_timeout_s=HANDSHAKE_S))


def test_a_client_that_stops_reading_costs_no_memory_and_is_closed_when_idle(server, good):
    _check(cases.non_reader(server.url, API_KEY, good, ACTIONS, pid=server.proc.pid, requests=12,
                            idle_timeout_s=IDLE_S))


def test_2000_fuzzed_frames_never_cause_an_internal_error(server, good):
    outcome = cases.fuzz(server.url, API_KEY, good, ACTIONS, frames=2000, seed=28)
    _check(outcome)
    assert outcome.figures["refused"] > 1500, outcome.detail  # the mutations reach the decoder's checks


def test_short_load_of_openpi_clients(server, good, tmp_path):
    outcome = cases.openpi_load(server.url, API_KEY, good, ACTIONS, pid=server.proc.pid, clients=4, seconds=2.0,
                                workdir=tmp_path)
    _check(outcome)
    assert server.proc.poll() is None


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-connections", "0"], "--max-connections must be > 0"),
    (["--idle-timeout", "-1"], "--idle-timeout must be >= 0"),
    (["--max-message-bytes", "0"], "--max-message-bytes must be > 0"),
    (["--api-key", "a", "--api-key-file", "x"], "give the API key once"),
    (["--api-key-file", "/nonexistent/key"], "--api-key-file /nonexistent/key: cannot read it"),
])
def test_bad_limit_and_key_flags_exit_2_before_loading(flags, message, tmp_path):
    done = run_embodied("serve", str(tmp_path / "never-read"), "--port", "0", *flags)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
