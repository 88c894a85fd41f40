"""Fixed tables of the Cosmos3 data recipe: resolution buckets, embodiment domain ids, caption sentences.

These are facts of NVIDIA's Cosmos3 training data (the pretrained model saw them), so they are kept as they are:
the buckets of each resolution tier, the domain id of each embodiment and the sentences the caption chain appends.
No torch here (the data config validates against these tables).
"""

from __future__ import annotations

__all__ = ["CONCAT_VIEW_DESCRIPTION", "DOMAIN_IDS", "RESOLUTION_BUCKETS", "VIEWPOINT_SENTENCES", "closest_bucket",
           "domain_id"]

RESOLUTION_BUCKETS: dict[str, dict[str, tuple[int, int]]] = {
    "256": {"1,1": (256, 256), "4,3": (320, 256), "3,4": (256, 320), "16,9": (320, 192), "9,16": (192, 320)},
    "480": {"1,1": (640, 640), "4,3": (736, 544), "3,4": (544, 736), "16,9": (832, 480), "9,16": (480, 832)},
    "704": {"1,1": (960, 960), "4,3": (1088, 832), "3,4": (832, 1088), "16,9": (1280, 704), "9,16": (704, 1280)},
    "720": {"1,1": (960, 960), "4,3": (1104, 832), "3,4": (832, 1104), "16,9": (1280, 720), "9,16": (720, 1280)},
    "768": {"1,1": (1024, 1024), "4,3": (1184, 880), "3,4": (880, 1184), "16,9": (1360, 768), "9,16": (768, 1360)},
    "1080": {"1,1": (1440, 1440), "4,3": (1664, 1248), "3,4": (1248, 1664), "16,9": (1920, 1080),
             "9,16": (1080, 1920)},
    "1280": {"1,1": (1712, 1712), "4,3": (1968, 1472), "3,4": (1472, 1968), "16,9": (2272, 1280),
             "9,16": (1280, 2272)},
    "2048": {"1,1": (2728, 2728), "4,3": (3160, 2368), "3,4": (2368, 3160), "16,9": (3640, 2048),
             "9,16": (2048, 3640)},
    "gt_2048": {"1,1": (5464, 5464), "4,3": (6304, 4728), "3,4": (4728, 6304), "16,9": (7280, 4096),
                "9,16": (4096, 7280)},
}
"""Resolution tier -> aspect key -> bucket ``(width, height)`` (note: width first)."""

DOMAIN_IDS: dict[str, int] = {
    "no_action": 0,
    "av": 1,
    "camera_pose": 2,
    "hand_pose": 3,
    "pusht": 4,
    "libero": 5,
    "umi": 6,
    "bridge_orig_lerobot": 7,
    "droid_lerobot": 8,
    "robomind-franka": 8,
    "robomind-franka-dual": 12,
    "robomind-ur": 13,
    "agibotworld": 15,
    "fractal": 20,
}
"""Embodiment name -> id of the domain-aware action projections (Cosmos' embodiment registry)."""

VIEWPOINT_SENTENCES: dict[str, str] = {
    "ego_view": "This video is captured from a first-person perspective looking at the scene.",
    "third_person_view": "This video is captured from a third-person perspective looking towards the agent from "
                         "the front.",
    "wrist_view": "This video is captured from a wrist-mounted camera.",
    "concat_view": "This video contains concatenated views from multiple camera perspectives.",
}
"""Viewpoint -> the sentence the caption chain appends for it."""

CONCAT_VIEW_DESCRIPTION = ("The top row is from the wrist-mounted camera. The bottom row contains two horizontally "
                           "concatenated third-person perspective views of the scene from opposite sides, with the "
                           "robot visible.")
"""How the three-view layout is described to the model (appended after the viewpoint sentence)."""

DURATION_SENTENCE = "The video is {duration:.1f} seconds long and is of {fps:.0f} FPS."
RESOLUTION_SENTENCE = "This video is of {height}x{width} resolution."


def domain_id(embodiment: str) -> int:
    """The domain id of ``embodiment`` (a key of :data:`DOMAIN_IDS`; KeyError otherwise)."""
    return DOMAIN_IDS[embodiment]


def closest_bucket(height: int, width: int, tier: str) -> tuple[int, int]:
    """``(bucket_h, bucket_w)`` of ``tier`` whose height/width ratio is closest to ``height / width`` (the first
    bucket in table order on a tie)."""
    ratio = height / width
    best: tuple[int, int] | None = None
    best_diff = float("inf")
    for bucket_w, bucket_h in RESOLUTION_BUCKETS[tier].values():
        diff = abs(ratio - bucket_h / bucket_w)
        if diff < best_diff:
            best, best_diff = (bucket_h, bucket_w), diff
    assert best is not None  # every tier has buckets
    return best
