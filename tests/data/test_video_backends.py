"""Video backends: same uint8 [N, C, H, W] output, codec probed from the file, clear refusals, bounded caches."""

from __future__ import annotations

import importlib.machinery
import json
import shutil
import sys
import types
from pathlib import Path

import pytest
import torch

from embodied_core import registry
from embodied_core.errors import DataError
from embodied_core.registry import groups
from embodied_data.lerobot import LeRobotMeta
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.video.backends import BACKEND_CLASSES, make_backend
from embodied_data.video.base import UnsupportedVideoError, backends_that_can_decode
from embodied_data.video.probe import probe_codec
from tests.support import DATASETS_DIR

AV1_FILE = DATASETS_DIR / "lerobot_written/v30/videos/observation.images.front/chunk-000/file-001.mp4"
MPEG4_FILE = DATASETS_DIR / "lingzu_pi05_v30/videos/image/chunk-000/file-004.mp4"
AV1_TIMES = [0.0, 0.1, 0.16666666666666666, 0.5, 0.2, 1.0]  # unsorted and repeated on purpose
MPEG4_TIMES = [3.0, 0.0, 2.0, 2.033333333333333, 0.4]


def test_all_backends_registered_with_requirements() -> None:
    assert set(registry.names(groups.VIDEO_BACKENDS)) >= set(BACKEND_CLASSES)
    for name, cls in BACKEND_CLASSES.items():
        spec = registry.get_spec(groups.VIDEO_BACKENDS, name)
        assert spec.requires == cls.requires
        assert registry.load_factory(groups.VIDEO_BACKENDS, name) is cls


def test_codec_is_probed_not_read_from_info_json() -> None:
    meta = LeRobotMeta.load(DATASETS_DIR / "lingzu_pi05_v30")
    assert meta.features["image"].declared_codec == "h264"
    assert probe_codec(str(MPEG4_FILE)) == "mpeg4"
    assert probe_codec(str(AV1_FILE)) == "av1"


@pytest.mark.parametrize(("path", "times"), [(AV1_FILE, AV1_TIMES), (MPEG4_FILE, MPEG4_TIMES)])
def test_pyav_equals_torchcodec(path: Path, times: list[float]) -> None:
    ref = make_backend("torchcodec").decode(path, times)
    got = make_backend("pyav").decode(path, times)
    assert ref.frames.dtype == torch.uint8 and ref.frames.shape[:2] == (len(times), 3)
    assert torch.equal(got.frames, ref.frames)
    assert got.pts == pytest.approx(ref.pts, abs=1e-6)
    assert ref.pts == pytest.approx(times, abs=1e-4)


def test_opencv_close_to_torchcodec_on_mpeg4() -> None:
    ref = make_backend("torchcodec").decode(MPEG4_FILE, MPEG4_TIMES)
    got = make_backend("opencv").decode(MPEG4_FILE, MPEG4_TIMES)
    assert got.frames.shape == ref.frames.shape and got.frames.dtype == torch.uint8
    assert (got.frames.float() - ref.frames.float()).abs().mean() <= 1.0  # documented in test_lerobot_golden
    assert got.pts == pytest.approx(ref.pts, abs=1e-4)


@pytest.mark.parametrize("backend", ["opencv"])
def test_av1_refused_with_backends_that_can(backend: str) -> None:
    with pytest.raises(UnsupportedVideoError, match=r"codec is av1 and opencv has no av1 decoder.*torchcodec, pyav"):
        make_backend(backend).decode(AV1_FILE, [0.0])


def test_refusal_uses_probed_codec_even_if_info_json_says_otherwise(tmp_path: Path) -> None:
    root = tmp_path / "v21"
    shutil.copytree(DATASETS_DIR / "lerobot_written/v21", root)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    info_path = root / "meta" / "info.json"
    info_path.chmod(0o644)
    info = json.loads(info_path.read_text())
    info["features"]["observation.images.front"]["info"]["video.codec"] = "h264"
    info_path.write_text(json.dumps(info))
    ds = LeRobotDataset(root, video_backend="opencv", camera_keys=["observation.images.front"])
    with pytest.raises(UnsupportedVideoError, match=r"episode 0, camera observation\.images\.front.*codec is av1"):
        ds[0]


def test_out_of_range_timestamp_is_an_error() -> None:
    for name in ("torchcodec", "pyav"):
        with pytest.raises(DataError, match=r"no frame at t=99"):
            make_backend(name).decode(MPEG4_FILE, [99.0])


def test_backends_that_can_decode() -> None:
    assert "opencv" not in backends_that_can_decode("av1")
    assert {"torchcodec", "pyav", "opencv"} <= set(backends_that_can_decode("mpeg4"))


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("decord") is not None, reason="decord is installed here")
def test_decord_missing_is_reported_before_use() -> None:
    assert registry.get_spec(groups.VIDEO_BACKENDS, "decord").missing_requirements() == ["decord"]
    with pytest.raises(UnsupportedVideoError, match=r"'decord' needs the package\(s\) decord.*torchcodec"):
        make_backend("decord")


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("decord") is None, reason="decord is not installable here")
def test_decord_matches_torchcodec_on_mpeg4() -> None:
    ref = make_backend("torchcodec").decode(MPEG4_FILE, MPEG4_TIMES)
    got = make_backend("decord").decode(MPEG4_FILE, MPEG4_TIMES)
    assert (got.frames.float() - ref.frames.float()).abs().mean() <= 1.0
    with pytest.raises(UnsupportedVideoError, match="no av1 decoder"):
        make_backend("decord").decode(AV1_FILE, [0.0])


def test_torchvision_without_video_reader_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """torchvision >= 0.26 removed torchvision.io.VideoReader: the backend says so and names working ones."""
    fake = types.ModuleType("torchvision")
    fake.__version__ = "0.28.0"
    fake.__spec__ = importlib.machinery.ModuleSpec("torchvision", None)
    fake.io = types.SimpleNamespace()  # no VideoReader
    monkeypatch.setitem(sys.modules, "torchvision", fake)
    with pytest.raises(UnsupportedVideoError, match=r"torchvision 0\.28\.0 has no video reader.*torchcodec, pyav"):
        make_backend("torchvision_av")
    assert "torchvision_av" not in backends_that_can_decode("mpeg4")


def test_lru_cache_reuses_and_evicts() -> None:
    backend = make_backend("torchcodec", cache_size=2)
    files = sorted((DATASETS_DIR / "lerobot_written/v21/videos/chunk-000/observation.images.wrist").glob("*.mp4"))
    backend.decode(files[0], [0.0])
    first = backend._cache[str(files[0])]
    backend.decode(files[0], [0.1])
    assert backend._cache[str(files[0])] is first  # reused, not reopened
    for path in files[1:]:
        backend.decode(path, [0.0])
    assert backend.num_open == 2 and list(backend._cache) == [str(files[-2]), str(files[-1])]


def _encode(path: Path, codec: str, *, num_frames: int = 45, fps: int = 30) -> None:
    """A small clip with B-frames whose frame k is recognisable by its grey level (10 + 5k)."""
    import av
    import numpy as np

    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.gop_size = 12
        stream.codec_context.options = {"bf": "2"} if codec == "libx264" else {}
        for k in range(num_frames):
            image = np.full((48, 64, 3), 10 + 5 * k, dtype=np.uint8)
            image[:8, : 2 + k] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.mark.parametrize("codec", ["libx264", "mpeg4"])
def test_backends_agree_on_clips_with_b_frames(tmp_path: Path, codec: str) -> None:
    path = tmp_path / f"{codec}.mp4"
    _encode(path, codec)
    times = [k / 30 for k in (40, 0, 13, 12, 11, 44, 25, 26, 3)]
    ref = make_backend("torchcodec").decode(path, times)
    assert ref.pts == pytest.approx(times, abs=1e-4)
    levels = ref.frames[:, :, 24:, :].float().mean(dim=(1, 2, 3))
    assert levels.tolist() == pytest.approx([10 + 5 * round(t * 30) for t in times], abs=3)
    assert torch.equal(make_backend("pyav").decode(path, times).frames, ref.frames)
    got = make_backend("opencv").decode(path, times)
    assert got.pts == pytest.approx(ref.pts, abs=1e-4)
    assert (got.frames.float() - ref.frames.float()).abs().mean() <= 1.0
