"""Entry-point specs of the video backends (group ``embodied.video_backends``; imports no torch)."""

from __future__ import annotations

from embodied_core.registry import PluginSpec

_PREFIX = "embodied_data.video"

TORCHCODEC = PluginSpec(
    name="torchcodec", description="FFmpeg via torchcodec (default); every codec FFmpeg has, AV1 included",
    factory=f"{_PREFIX}.torchcodec_backend:TorchCodecBackend", requires=("torchcodec",),
    install_hint="pip install 'torchcodec>=0.12,<0.14' and a system FFmpeg 4-7")
PYAV = PluginSpec(
    name="pyav", description="FFmpeg via PyAV; frames identical to torchcodec",
    factory=f"{_PREFIX}.pyav_backend:PyAVBackend", requires=("av",), install_hint="pip install av")
OPENCV = PluginSpec(
    name="opencv", description="OpenCV VideoCapture (no AV1 decoder)",
    factory=f"{_PREFIX}.opencv_backend:OpenCVBackend", requires=("cv2",),
    install_hint="pip install opencv-python-headless")
DECORD = PluginSpec(
    name="decord", description="decord VideoReader (no AV1 decoder)",
    factory=f"{_PREFIX}.decord_backend:DecordBackend", requires=("decord",),
    install_hint="pip install decord (wheels exist for Python <= 3.10 on x86-64 only)")
TORCHVISION_AV = PluginSpec(
    name="torchvision_av", description="torchvision.io.VideoReader with PyAV (torchvision < 0.26 only)",
    factory=f"{_PREFIX}.torchvision_backend:TorchvisionAVBackend", requires=("torchvision", "av"),
    install_hint="pip install 'torchvision<0.26' av (newer torchvision has no video reader)")
