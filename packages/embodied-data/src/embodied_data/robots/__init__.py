"""Embodiment layouts (``--robot-type``): dataset state/action dimension names -> a canonical order."""

from embodied_data.robots.layouts import BUILTIN_LAYOUTS, LayoutTransform, RobotLayout, match_layout, resolve_layout

__all__ = ["BUILTIN_LAYOUTS", "LayoutTransform", "RobotLayout", "match_layout", "resolve_layout"]
