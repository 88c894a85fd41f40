"""LeRobot datasets (v2.0, v2.1, v3.0) read with our own code: metadata, the map-style dataset, the factory.

``embodied_data.lerobot.metadata`` is light (pyarrow, numpy; no torch) and serves ``embodied data inspect``;
``embodied_data.lerobot.dataset`` holds the torch Dataset.
"""

from embodied_data.lerobot.features import FeatureInfo
from embodied_data.lerobot.metadata import EpisodeInfo, LeRobotMeta, VideoSegment, read_version

__all__ = ["EpisodeInfo", "FeatureInfo", "LeRobotMeta", "VideoSegment", "read_version"]
