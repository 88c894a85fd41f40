"""``embodied serve`` with the real ``openpi-client`` (PyPI, its own venv) as the client: metadata on connect,
actions equal to ``predict_action`` exactly, bad requests answered while the server keeps serving, two concurrent
clients, clients that hang up mid-request, the API key, ``/healthz`` and a clean SIGTERM."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import torch

from embodied_core import load_policy
from tests.eval.serve_support import ServeProcess, dataset_observations, run_openpi_client
from tests.support import run_embodied

API_KEY = "test-key-123"
KEY_MAP = "image=observation.images.front,state=observation.state,prompt=task"


def _openpi_style(obs: dict) -> dict:
    """The same observation under the client's own key names (what --obs-key-map maps back)."""
    return {"image": obs["observation.images.front"], "state": obs["observation.state"], "prompt": obs["task"]}


@pytest.fixture(scope="module")
def server(checkpoint):
    proc = ServeProcess(str(checkpoint), "--api-key", API_KEY, "--obs-key-map", KEY_MAP)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def observations(synth_dataset):
    return dataset_observations(synth_dataset, [0, 5, 30, 61])


def test_banner_names_model_cameras_dims_device_and_url(server, checkpoint):
    text = "\n".join(server.banner)
    assert "pi05_tiny" in text and "step 6" in text and str(checkpoint) in text
    assert "observation.images.front: uint8 64x64x3" in text
    assert "observation.state [2]" in text and "action [10, 2]" in text
    assert "device   cpu" in text and server.url.startswith("ws://127.0.0.1:")


def test_openpi_client_gets_metadata_and_exactly_the_policys_actions(server, checkpoint, observations, tmp_path):
    # mapped keys (HWC), LeRobot keys, mapped keys with a CHW frame, LeRobot keys with a float64 state
    chw = observations[2]["observation.images.front"].transpose(2, 0, 1)
    requests = [_openpi_style(observations[0]), observations[1], {**_openpi_style(observations[2]), "image": chw},
                {**observations[3], "observation.state": observations[3]["observation.state"].astype(np.float64)}]
    arrays, facts = run_openpi_client(tmp_path, server.url, "actions", requests, api_key=API_KEY)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the server (OMP_NUM_THREADS=1): same kernels, same bits
    try:
        policy = load_policy(checkpoint, seed=0)  # the server resets its policy when a lone client connects
        expected = [policy.predict_action(obs) for obs in observations]
    finally:
        torch.set_num_threads(threads)
    for i, want in enumerate(expected):
        got = arrays[f"a{i}"]
        assert got.dtype == np.float32 and got.shape == (10, 2)
        np.testing.assert_array_equal(got, want)

    metadata = facts["metadata"]
    assert metadata["obs_key_map"] == {"image": "observation.images.front", "state": "observation.state",
                                       "prompt": "task"}
    assert {k: metadata[k] for k in policy.metadata.to_dict()} == policy.metadata.to_dict()
    timings = facts["timings"]
    assert all(t["keys"] == ["actions", "policy_timing", "server_timing"] for t in timings)
    assert all(t["server_timing"]["infer_ms"] > 0 and t["server_timing"]["queue_ms"] >= 0 for t in timings)
    assert "prev_total_ms" not in timings[0]["server_timing"]
    assert all(t["server_timing"]["prev_total_ms"] > 0 for t in timings[1:])


def test_bad_requests_get_errors_naming_key_and_shape_and_the_connection_keeps_working(server, observations,
                                                                                    tmp_path):
    good = observations[0]
    bad = [
        {k: v for k, v in good.items() if k != "observation.state"},                        # missing key
        {**good, "foo": np.zeros(3, np.float32)},                                            # extra key
        {**good, "observation.images.front": np.zeros((32, 32, 3), np.uint8)},               # wrong shape
        {**good, "observation.images.front": good["observation.images.front"].astype(np.float32)},  # wrong dtype
        {**_openpi_style(good), "state": np.zeros(3, np.float32)},                           # wrong size, mapped
    ]
    _, facts = run_openpi_client(tmp_path, server.url, "bad", [good, *bad], api_key=API_KEY)
    errors = facts["errors"]
    assert None not in errors, errors
    assert all("bad request" in e and "expected: observation.images.front uint8 (64, 64, 3)" in e for e in errors)
    assert "observation.state" in errors[0] and "missing" in errors[0]
    assert "'foo'" in errors[1]
    assert "(32, 32, 3)" in errors[2]
    assert "float32" in errors[3]
    assert "observation.state" in errors[4] and "'state' -> 'observation.state'" in errors[4]
    assert facts["recovered_shapes"] == [[10, 2]] * len(bad)
    assert server.proc.poll() is None


def test_two_concurrent_clients_are_both_served_and_one_waits_in_the_queue(server, observations, tmp_path):
    _, facts = run_openpi_client(tmp_path, server.url, "concurrent", observations, api_key=API_KEY)
    results = facts["results"]
    assert [len(r) for r in results] == [4, 4]
    assert all(r["shape"] == [10, 2] for client in results for r in client)
    waits = [r["server_timing"]["queue_ms"] for client in results for r in client]
    assert max(waits) > 1.0, waits  # sent at the same moment: one request waited for the other's inference


def test_clients_hanging_up_mid_request_do_not_hurt_the_server(server, observations, tmp_path):
    arrays, facts = run_openpi_client(tmp_path, server.url, "drop", observations[:3], api_key=API_KEY)
    assert facts["served_after_drop"] and arrays["after"].shape == (10, 2)
    assert server.proc.poll() is None


def test_connections_without_the_api_key_are_refused(server, tmp_path):
    _, facts = run_openpi_client(tmp_path, server.url, "nokey", [], api_key=None)
    assert facts["refused"] and facts["status"] == 401, facts


def test_healthz_answers_without_a_key(server):
    http_url = server.url.replace("ws://", "http://") + "/healthz"
    with urllib.request.urlopen(http_url, timeout=10) as response:
        assert response.status == 200 and response.read() == b"OK\n"


def test_sigterm_closes_cleanly(server):
    code, out, err = server.stop()
    assert code == 0, err[-2000:]
    assert "stopped" in out and "Traceback" not in err


def test_serve_help_imports_no_torch():
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "embodied_core.cli.main", "serve", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--obs-key-map" in done.stdout
    imported = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    assert not [m for m in imported if m.split(".")[0] == "torch"]


def test_bad_flags_fail_before_loading_with_exit_2(checkpoint, tmp_path):
    done = run_embodied("serve", str(checkpoint), "--obs-key-map", "image")
    assert done.returncode == 2 and "CLIENT_KEY=POLICY_KEY" in done.stderr and "Traceback" not in done.stderr
    done = run_embodied("serve", str(checkpoint), "--obs-key-map", "image=observation.images.top", "--port", "0")
    assert done.returncode == 2 and "observation.images.front" in done.stderr
    done = run_embodied("serve", str(tmp_path / "missing"), "--port", "0")
    assert done.returncode in (1, 2) and "missing" in done.stderr and "Traceback" not in done.stderr
