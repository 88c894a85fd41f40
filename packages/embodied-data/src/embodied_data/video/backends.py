"""The built-in backends by name, and the lookup that builds one (registered plugins included)."""

from __future__ import annotations

from embodied_data.video.base import VideoBackend
from embodied_data.video.decord_backend import DecordBackend
from embodied_data.video.opencv_backend import OpenCVBackend
from embodied_data.video.pyav_backend import PyAVBackend
from embodied_data.video.torchcodec_backend import TorchCodecBackend
from embodied_data.video.torchvision_backend import TorchvisionAVBackend

__all__ = ["BACKEND_CLASSES", "make_backend"]

BACKEND_CLASSES: dict[str, type[VideoBackend]] = {
    cls.name: cls
    for cls in (TorchCodecBackend, PyAVBackend, OpenCVBackend, DecordBackend, TorchvisionAVBackend)
}


def make_backend(name: str, *, cache_size: int = 8) -> VideoBackend:
    """Builds the backend registered as ``name`` in ``embodied.video_backends`` (built-ins without metadata too)."""
    from embodied_core import registry
    from embodied_core.errors import UsageError
    from embodied_core.registry import groups

    try:
        factory = registry.load_factory(groups.VIDEO_BACKENDS, name, flag="--video-backend")
    except UsageError:
        if name not in BACKEND_CLASSES:
            raise
        factory = BACKEND_CLASSES[name]  # running from a source tree whose entry points are not installed
    backend = factory(cache_size=cache_size)
    if not isinstance(backend, VideoBackend):
        raise UsageError(f"--video-backend {name}: the plugin built a {type(backend).__name__}, not a VideoBackend")
    return backend
