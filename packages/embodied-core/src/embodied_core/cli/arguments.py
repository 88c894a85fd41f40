"""Argument types shared by the ``embodied`` sub-commands of every package (plain argparse ``type=`` callables)."""

from __future__ import annotations

import argparse

__all__ = ["index_list"]


def index_list(text: str) -> list[int]:
    """``"0-3,7"`` -> ``[0, 1, 2, 3, 7]`` (episode lists and the like), in the order given.

    Raises:
        argparse.ArgumentTypeError: anything but comma-separated non-negative integers and ``low-high`` ranges
            (argparse turns it into a usage error naming the option, exit 2).
    """
    out: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or (dash and int(high) < int(low)):
            raise argparse.ArgumentTypeError(f"{text!r}: expected indices and ranges like 0-9,12")
        out.extend(range(int(low), int(high or low) + 1))
    return out
