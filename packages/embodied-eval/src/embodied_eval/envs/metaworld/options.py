"""Options of the ``metaworld`` env plugin (``PluginSpec.options``; no simulator import)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

__all__ = ["DEFAULT_IMAGE_SIZE", "MetaworldOptions"]

DEFAULT_IMAGE_SIZE = 128
"""Frame side of the fast look when no policy says otherwise."""


def _image_size(instance: Any, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and not (32 <= value <= 480 and value % 2 == 0):
        raise ValueError(f"image_size must be even and within 32..480 (got {value})")


@attrs.frozen(kw_only=True)
class MetaworldOptions:
    """What ``--env metaworld`` runs and how it renders."""

    task: str | None = None
    """MetaWorld v3 task, or several comma-separated (button-press-topdown-v3); or use suite."""
    suite: str | None = None
    """A task list: easy, medium, hard, very_hard (lerobot's difficulty groups) or mt10 (MetaWorld's MT10)."""
    render: Literal["fast", "lerobot"] = "fast"
    """fast: image_size frames without shadows or anti-aliasing; lerobot: 480 x 480 frames in MetaWorld's
    default look, exactly what lerobot-eval gives a policy (for checkpoints trained on lerobot's data)."""
    image_size: int | None = attrs.field(default=None, validator=_image_size)
    """Frame side rendered by MetaWorld with render fast (default: the policy's frame size, else 128)."""

    def __attrs_post_init__(self) -> None:
        # Names are checked when the options are built, before a checkpoint is loaded or a simulator started.
        # That neither task nor suite is given is only an error when the env is made: the defaults must build
        # (`embodied plugins --check` builds them).
        from embodied_eval.envs.metaworld.tasks import select_tasks

        if self.task is not None or self.suite is not None:
            select_tasks(self.task, self.suite)
        if self.render == "lerobot" and self.image_size not in (None, 480):
            raise ValueError(f"render lerobot gives lerobot's 480 x 480 frames; image_size {self.image_size} needs "
                             "render fast")
