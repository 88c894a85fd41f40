"""The wire format byte for byte against openpi-client's own ``msgpack_numpy`` (run in its venv), refusing what
must never be decoded, and the observation key map."""

from __future__ import annotations

import re
import subprocess

import msgpack
import numpy as np
import pytest

from embodied_core.errors import UsageError
from embodied_eval.keymap import parse_key_map
from embodied_eval.wire import WireError, pack, unpack
from tests.eval.serve_support import OPENPI_PYTHON

_OPENPI_PACK = """
import sys
import numpy as np
from openpi_client import msgpack_numpy
message = {"image": np.arange(24, dtype=np.uint8).reshape(2, 3, 4), "state": np.array([0.5, -1.25], np.float32),
           "wide": np.arange(3, dtype=np.float64), "step": np.int64(7), "scale": np.float32(0.25),
           "prompt": "pick up the cube", "more": [1, 2.5, None, True], "nested": {"flag": np.bool_(True)},
           "fortran": np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3))}
sys.stdout.buffer.write(msgpack_numpy.Packer().pack(message))
"""


def _message() -> dict:
    return {"image": np.arange(24, dtype=np.uint8).reshape(2, 3, 4), "state": np.array([0.5, -1.25], np.float32),
            "wide": np.arange(3, dtype=np.float64), "step": np.int64(7), "scale": np.float32(0.25),
            "prompt": "pick up the cube", "more": [1, 2.5, None, True], "nested": {"flag": np.bool_(True)},
            "fortran": np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3))}


def test_same_bytes_as_openpi_client_and_reads_them_back():
    done = subprocess.run([str(OPENPI_PYTHON), "-c", _OPENPI_PACK], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert pack(_message()) == done.stdout
    decoded = unpack(done.stdout)
    for key, value in _message().items():
        if isinstance(value, np.ndarray):
            assert decoded[key].dtype == value.dtype and np.array_equal(decoded[key], value), key
        elif isinstance(value, np.generic):
            assert type(decoded[key]) is type(value) and decoded[key] == value, key
    assert decoded["prompt"] == "pick up the cube" and decoded["more"] == [1, 2.5, None, True]
    assert decoded["nested"]["flag"] is np.True_


def _array_map(data: bytes, dtype: str, shape: list) -> bytes:
    return msgpack.packb({"x": {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}})


@pytest.mark.parametrize(("payload", "message"), [
    (_array_map(b"\x00" * 7, "<f4", [2]), "needs 8 bytes, got 7"),
    (_array_map(b"\x00" * 8, "|O", [1]), "refused numpy dtype '|O'"),
    (_array_map(b"\x00" * 16, "<c16", [1]), "refused numpy dtype '<c16'"),
    (_array_map(b"\x00" * 4, "<f4", [-1]), "non-negative"),
    (_array_map(b"\x00" * 4, "no-such-type", [1]), "unknown numpy dtype"),
    (_array_map(b"\x00" * 8, "(,", [1]), "plain dtypes only"),  # np.dtype("(,") raises SyntaxError (found by fuzzing)
    (b"\xc1", "not a valid msgpack message"),
    (msgpack.packb([1]) + b"\x01", "not a valid msgpack message"),
])
def test_bad_payloads_are_refused_with_a_reason(payload, message):
    with pytest.raises(WireError, match=message):
        unpack(payload)


def test_object_arrays_are_never_sent():
    with pytest.raises(WireError, match="refused"):
        pack({"x": np.array([object()])})


def test_key_map_renames_nested_client_keys_and_passes_lerobot_keys_through():
    key_map = parse_key_map(" images/cam_high=observation.images.top , state=observation.state,prompt=task")
    out = key_map.apply({"images": {"cam_high": 1}, "state": 2, "prompt": "go", "observation.images.wrist": 3})
    assert out == {"observation.images.top": 1, "observation.state": 2, "task": "go", "observation.images.wrist": 3}
    assert key_map.source_of("task") == "prompt"
    with pytest.raises(UsageError, match="both map to 'task'"):
        parse_key_map("prompt=task,text=task")
    with pytest.raises(UsageError, match=r"both 'state' .* and 'observation\.state'"):
        key_map.apply({"state": 1, "observation.state": 2})
    valid = ["observation.images.front", "observation.state", "task"]
    with pytest.raises(UsageError, match=re.escape(f"map client keys to {', '.join(valid)}")):
        parse_key_map("image=observation.images.top").check_targets(valid)
