"""Probing a video file for its codec (the file is the truth; ``video.codec`` in info.json can be wrong)."""

from __future__ import annotations

import functools
import importlib.util
import os

from embodied_core.errors import DataError

__all__ = ["normalize_codec", "probe_codec"]

_ALIASES = {
    "libdav1d": "av1", "libaom-av1": "av1", "av1_cuvid": "av1", "av1_qsv": "av1", "libsvtav1": "av1",
    "h264_cuvid": "h264", "libopenh264": "h264", "hevc_cuvid": "hevc", "h265": "hevc", "mpeg4_cuvid": "mpeg4",
    "libvpx-vp9": "vp9", "libvpx": "vp8",
}


def normalize_codec(name: str) -> str:
    """Maps decoder/encoder names to the codec (``libdav1d`` -> ``av1``)."""
    name = name.lower()
    return _ALIASES.get(name, name)


@functools.lru_cache(maxsize=4096)
def _probe(path: str, mtime_ns: int, size: int) -> str:
    if importlib.util.find_spec("av") is not None:
        import av

        try:
            with av.open(path) as container:
                if not container.streams.video:
                    raise DataError(f"video file {path} has no video stream")
                # the descriptor name is the codec (av1), the context name may be a decoder (libdav1d)
                stream = container.streams.video[0]
                return normalize_codec(stream.codec_context.codec.name)
        except av.FFmpegError as exc:
            raise DataError(f"video file {path} cannot be read: {exc}") from None
    from torchcodec.decoders import VideoDecoder

    try:
        return normalize_codec(str(VideoDecoder(path, seek_mode="approximate").metadata.codec))
    except (RuntimeError, ValueError) as exc:
        raise DataError(f"video file {path} cannot be read: {exc}") from None


def probe_codec(path: str) -> str:
    """Normalized codec name (``av1``, ``h264``, ``hevc``, ``mpeg4``, ...) of the first video stream of ``path``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DataError(f"video file {path} does not exist") from None
    return _probe(os.path.abspath(path), st.st_mtime_ns, st.st_size)
