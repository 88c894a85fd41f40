"""A third-party embodied plugin: tiny_flow_policy, the Lion optimizer and a run-events hook."""

__version__ = "0.1.0"
