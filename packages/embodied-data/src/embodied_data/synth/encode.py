"""MP4 encoding with PyAV for the synthetic dataset writer.

The encoder is chosen from what the installed libav offers: H.264 (libx264) when present, else MPEG-4
Part 2, which every FFmpeg build has. Frame ``k`` is written at pts ``k / fps`` exactly, with a short
keyframe interval so readers can seek cheaply (LeRobot's writer uses a similar short GOP).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

import numpy as np

from embodied_core.errors import DataError

__all__ = ["ENCODER_PREFERENCE", "pick_encoder", "write_mp4"]

ENCODER_PREFERENCE = (("libx264", "h264"), ("h264", "h264"), ("mpeg4", "mpeg4"))
"""(libav encoder name, codec name written to info.json), best first."""


def pick_encoder(preferred: str | None = None) -> tuple[str, str]:
    """Returns ``(encoder, codec)`` of the first usable encoder (``preferred``: a codec name to insist on)."""
    import av

    candidates = [c for c in ENCODER_PREFERENCE if preferred is None or preferred in c]
    for encoder, codec in candidates:
        try:
            av.codec.Codec(encoder, "w")
        except Exception:
            continue
        return encoder, codec
    valid = ", ".join(codec for _, codec in ENCODER_PREFERENCE)
    raise DataError(f"no usable video encoder{f' for codec {preferred!r}' if preferred else ''} in this PyAV "
                    f"build (tried {', '.join(e for e, _ in candidates) or 'nothing'}; supported codecs: {valid})")


def write_mp4(path: Path, frames: Iterable[np.ndarray], *, fps: int, encoder: str, gop: int = 10,
              quality: int = 20) -> int:
    """Encodes uint8 ``[H, W, 3]`` RGB frames to ``path``; returns the number of frames written.

    ``quality`` is the CRF for H.264 and the fixed quantizer (``qscale``, 2 = best) mapped from it for MPEG-4.
    """
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(encoder, rate=fps)
        stream.pix_fmt = "yuv420p"
        options = {"g": str(gop)}
        if encoder == "libx264":
            # No B-frames: decode order equals presentation order, which keeps seeking simple for readers.
            options.update({"crf": str(quality), "bf": "0", "preset": "veryfast"})
        else:
            stream.codec_context.qscale = max(2, min(31, quality // 6))
            options.update({"bf": "0"})
        stream.options = options
        time_base = Fraction(1, fps)
        stream.codec_context.time_base = time_base
        for frame_rgb in frames:
            if count == 0:
                height, width = frame_rgb.shape[:2]
                if height % 2 or width % 2:
                    raise DataError(f"{path}: yuv420p video needs even frame sides, got {width}x{height}")
                stream.width, stream.height = width, height
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame_rgb), format="rgb24")
            frame.pts = count
            frame.time_base = time_base
            for packet in stream.encode(frame):
                container.mux(packet)
            count += 1
        for packet in stream.encode():
            container.mux(packet)
    return count
