"""DreamZero's embodiments: modality keys, camera layout, prompt template and action-head projector id.

Keys are the names of GR00T's ``meta/modality.json`` (``video.<name>``, ``state.<name>``, ``action.<name>``,
``annotation.<name>``), as DreamZero (and LoongForge's ``dreamzero`` strategy) declares them per embodiment tag.
Layouts (``images [T, H', W', 3]`` after :func:`compose_views`):

- ``libero_side_by_side``: exterior | wrist (``[T, h, 2w, 3]``);
- ``droid_grid``: the wrist view repeated twice along the width on top, left | right exterior below
  (``[T, 2h, 2w, 3]``);
- ``grid_2x2``: view 0 top-left, view 1 bottom-left, view 2 top-right, black bottom-right (``[T, 2h, 2w, 3]``).

Prompts: ``"A multi-view video shows that a robot " + task.lower() + <layout sentence> + " The robot " +
task.lower()`` (no period after the task: DreamZero's wording, kept character for character because the
pretrained text conditioning saw it).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import torch

from embodied_core.errors import UsageError

__all__ = ["EMBODIMENTS", "NEGATIVE_PROMPT", "Embodiment", "compose_views", "embodiment", "prompt_for"]

NEGATIVE_PROMPT = (
    "Vibrant colors, overexposed, static, blurry details, text, subtitles, style, artwork, painting, image, still, "
    "grayscale, dull, worst quality, low quality, JPEG artifacts, ugly, mutilated, extra fingers, bad hands, bad "
    "face, deformed, disfigured, mutated limbs, fused fingers, stagnant image, cluttered background, three legs, "
    "many people in the background, walking backwards.")
"""Wan's negative prompt, the ``text_negative`` of every sample."""

_PREFIX = "A multi-view video shows that a robot "
_FOUR_VIEWS_HEAD = (" The video is split into four views: The top-left view shows the camera view from the robot's "
                    "head, the top-right view shows the camera view from the right hand, the bottom-left view shows "
                    "the camera view from the left hand, and the bottom-right view is a black screen (inactive "
                    "view). The robot ")
_DROID_VIEWS = (" The video is split into three views: The top view shows the camera view from the robot's wrist, "
                "the bottom-left view shows the camera view from the left exterior camera, and the bottom-right "
                "view shows the camera view from the right exterior camera. During training, one of the two bottom "
                "exterior views may be a black screen (dropped view). The robot ")
_LIBERO_VIEWS = (" The video is split into two horizontal views: the left view shows the exterior camera and the "
                 "right view shows the wrist camera. The robot ")
_YAM_VIEWS = (" The video is split into four views: The top-left view shows the top camera, the top-right view "
              "shows the right camera, the bottom-left view shows the left camera, and the bottom-right view is a "
              "black screen. The robot ")


@attrs.frozen(kw_only=True)
class Embodiment:
    """One embodiment preset.

    Attributes:
        tag: the embodiment tag (``data.embodiment_tag``).
        id: the action-head projector index (``embodiment_id`` of the batch).
        video: modality video names, in view order.
        state: modality state names, concatenated in this order.
        action: modality action names, concatenated in this order.
        language: modality annotation names; training picks one at random when there are several.
        layout: how the views are arranged (module docstring).
        views_sentence: the part of the prompt between the two copies of the task.
    """

    tag: str
    id: int
    video: tuple[str, ...]
    state: tuple[str, ...]
    action: tuple[str, ...]
    language: tuple[str, ...]
    layout: str
    views_sentence: str


EMBODIMENTS: dict[str, Embodiment] = {
    "oxe_droid": Embodiment(
        tag="oxe_droid", id=17, video=("exterior_image_1_left", "exterior_image_2_left", "wrist_image_left"),
        state=("joint_position", "gripper_position"), action=("joint_position", "gripper_position"),
        language=("language.language_instruction", "language.language_instruction_2",
                  "language.language_instruction_3"),
        layout="droid_grid", views_sentence=_DROID_VIEWS),
    "libero_sim": Embodiment(
        tag="libero_sim", id=21, video=("image", "wrist_image"), state=("state",), action=("actions",),
        language=("task",), layout="libero_side_by_side", views_sentence=_LIBERO_VIEWS),
    "agibot": Embodiment(
        tag="agibot", id=26, video=("top_head", "hand_left", "hand_right"),
        state=("left_arm_joint_position", "right_arm_joint_position", "left_effector_position",
               "right_effector_position", "head_position", "waist_position"),
        action=("left_arm_joint_position", "right_arm_joint_position", "left_effector_position",
                "right_effector_position", "head_position", "waist_position", "robot_velocity"),
        language=("language.action_text",), layout="grid_2x2", views_sentence=_FOUR_VIEWS_HEAD),
    "yam": Embodiment(
        tag="yam", id=32, video=("top_camera-images-rgb", "left_camera-images-rgb", "right_camera-images-rgb"),
        state=("left_joint_pos", "left_gripper_pos", "right_joint_pos", "right_gripper_pos"),
        action=("left_joint_pos", "left_gripper_pos", "right_joint_pos", "right_gripper_pos"),
        language=("task",), layout="grid_2x2", views_sentence=_YAM_VIEWS),
}


def embodiment(tag: str) -> Embodiment:
    """The preset of ``tag``; a UsageError naming the valid tags otherwise."""
    try:
        return EMBODIMENTS[tag]
    except KeyError:
        raise UsageError(f"data.embodiment_tag={tag!r} is not a DreamZero embodiment; valid: "
                         f"{', '.join(EMBODIMENTS)}") from None


_BY_ID = {e.id: e for e in EMBODIMENTS.values()}


def prompt_for(task: str, embodiment_id: int, *, num_views: int) -> str:
    """The DreamZero prompt of ``task`` for the embodiment with projector id ``embodiment_id``.

    A single-view agibot sample keeps the DreamZero wording of its multi-view layout only with several views
    (as the reference); with one view it is an error, since no template describes it.
    """
    target = _BY_ID.get(int(embodiment_id))
    if target is None or (target.tag == "agibot" and num_views <= 1):
        raise UsageError(f"embodiment_id {embodiment_id} (views: {num_views}) has no DreamZero prompt template; "
                         f"known ids: {', '.join(f'{e.tag}={e.id}' for e in EMBODIMENTS.values())}")
    lowered = task.lower()
    return _PREFIX + lowered + target.views_sentence + lowered


def compose_views(views: Sequence[torch.Tensor], layout: str) -> torch.Tensor:
    """Arranges views ``[T, h, w, 3]`` (uint8) into one ``[T, H', W', 3]`` frame per time step."""
    first = views[0]
    t, h, w, c = first.shape
    if layout == "libero_side_by_side" and len(views) >= 2:
        return torch.cat([views[0], views[1]], dim=2)
    if layout == "droid_grid" and len(views) >= 3:
        out = torch.zeros((t, 2 * h, 2 * w, c), dtype=first.dtype)
        out[:, :h] = views[2].repeat_interleave(2, dim=2)
        out[:, h:, :w] = views[0]
        out[:, h:, w:] = views[1]
        return out
    if len(views) == 1:
        return first
    out = torch.zeros((t, 2 * h, 2 * w, c), dtype=first.dtype)
    out[:, :h, :w] = views[0]
    out[:, h:, :w] = views[1]
    if len(views) > 2:
        out[:, :h, w:] = views[2]
    return out
