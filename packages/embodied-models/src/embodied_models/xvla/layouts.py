"""The action spaces of X-VLA as data: widths, gripper channels and loss terms (no torch).

Port of the layouts in lerobot ``policies/xvla/action_hub.py`` (the X-VLA action hub). A space fixes the model's
action width, which channels are real actions, which channels of the state and of the noisy action are zeroed
before the network, which are squashed by a sigmoid at sampling, and the loss dict:

======================  =====  ====  ============  ========================================================
space                   model  real  zeroed (=     loss terms (each a mean over its channels, times its scale)
                        width  dims  sigmoid)
======================  =====  ====  ============  ========================================================
``ee6d``                20     20    9, 19         position 500 x (MSE 0-2 + MSE 10-12), rotate6D 10 x (MSE 3-8
                                                   + MSE 13-18), gripper (BCE 9 + BCE 19) / 2
``joint``               14     14    6, 13         joints MSE of the other 12, gripper 0.1 x (BCE 6 + BCE 13) / 2
``agibot_ee6d``         20     20    -             position, rotate6D as ee6d, gripper 10 x MSE (9, 19)
``franka_joint7``       20     7     -             joints MSE 0-6
``so101_bimanual``      20     12    5, 11         joints MSE 0-11, gripper MSE (5, 11), left arm MSE 0-5, right arm
                                                   MSE 6-11 (overlapping, summed)
``auto``                max    N     -             joints MSE 0..N-1
======================  =====  ====  ============  ========================================================

Channels past the real dims are zero-padded targets: they carry noise into the network during training but are
in no loss and are cut from the returned actions.
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["ACTION_LAYOUTS", "ActionLayout", "LossTerm", "layout_for", "layout_problems"]


@attrs.frozen
class LossTerm:
    """One entry of a space's loss dict: ``scale * sum(mean over each group) / (len(groups) if average else 1)``.

    Attributes:
        name: the key in the loss dict (also the logged metric).
        kind: ``mse`` (squared error) or ``bce`` (binary cross-entropy on logits; targets in [0, 1]).
        groups: channel groups; each contributes the mean of its elements over batch, horizon and channels.
        scale: factor of the term.
        average: divide the sum of the group means by the number of groups.
    """

    name: str
    kind: Literal["mse", "bce"]
    groups: tuple[tuple[int, ...], ...]
    scale: float = 1.0
    average: bool = False

    def channels(self) -> tuple[int, ...]:
        """Every channel the term reads, in order, without repeats."""
        return tuple(dict.fromkeys(c for group in self.groups for c in group))


@attrs.frozen
class ActionLayout:
    """An action space (see the module doc).

    Attributes:
        name: the ``model.action_mode`` value.
        dim_action: the model's action width (targets are zero-padded to it).
        real_dim: leading channels that are real actions (what sampling returns).
        zeroed: channels of the state and of the noisy action set to 0 before the network (grippers).
        sigmoid: channels squashed by a sigmoid at sampling (gripper logits of the BCE spaces).
        terms: the loss dict, in the reference's order (it sets the summation order of the total).
        fixed_real_dim: whether the dataset's action width must equal ``real_dim`` (spaces named after one robot).
    """

    name: str
    dim_action: int
    real_dim: int
    zeroed: tuple[int, ...] = ()
    sigmoid: tuple[int, ...] = ()
    terms: tuple[LossTerm, ...] = ()
    fixed_real_dim: bool = False

    def bce_channels(self) -> tuple[int, ...]:
        """Channels trained with BCE: their targets must be in [0, 1]."""
        return tuple(c for term in self.terms if term.kind == "bce" for c in term.channels())


def _span(start: int, stop: int) -> tuple[int, ...]:
    return tuple(range(start, stop))


_POSITION = LossTerm("position_loss", "mse", (_span(0, 3), _span(10, 13)), 500.0)
_ROTATION = LossTerm("rotate6D_loss", "mse", (_span(3, 9), _span(13, 19)), 10.0)

ACTION_LAYOUTS: dict[str, ActionLayout] = {
    "ee6d": ActionLayout("ee6d", 20, 20, zeroed=(9, 19), sigmoid=(9, 19), terms=(
        _POSITION, _ROTATION, LossTerm("gripper_loss", "bce", ((9,), (19,)), 1.0, average=True))),
    "joint": ActionLayout("joint", 14, 14, zeroed=(6, 13), sigmoid=(6, 13), terms=(
        LossTerm("joints_loss", "mse", (tuple(c for c in range(14) if c not in (6, 13)),)),
        LossTerm("gripper_loss", "bce", ((6,), (13,)), 0.1, average=True))),
    "agibot_ee6d": ActionLayout("agibot_ee6d", 20, 20, terms=(
        _POSITION, _ROTATION, LossTerm("gripper_loss", "mse", ((9, 19),), 10.0))),
    "franka_joint7": ActionLayout("franka_joint7", 20, 7, fixed_real_dim=True, terms=(
        LossTerm("joints_loss", "mse", (_span(0, 7),)),)),
    "so101_bimanual": ActionLayout("so101_bimanual", 20, 12, zeroed=(5, 11), sigmoid=(5, 11), fixed_real_dim=True,
                                   terms=(LossTerm("joints_loss", "mse", (_span(0, 12),)),
                                          LossTerm("gripper_loss", "mse", ((5, 11),)),
                                          LossTerm("left_arm_loss", "mse", (_span(0, 6),)),
                                          LossTerm("right_arm_loss", "mse", (_span(6, 12),)))),
}
"""The fixed spaces by name; ``auto`` is built per dataset by :func:`layout_for`."""


def layout_for(mode: str, *, action_dim: int | None, max_action_dim: int) -> ActionLayout:
    """The layout of ``model.action_mode``; ``auto`` covers the first ``action_dim`` of ``max_action_dim`` channels.

    Raises:
        ValueError: an unknown mode, or ``auto`` without an action width.
    """
    if mode == "auto":
        if action_dim is None:
            raise ValueError("model.action_mode=auto needs data.action_dim (set it or let the dataset tell it)")
        return ActionLayout("auto", max_action_dim, action_dim, fixed_real_dim=True,
                            terms=(LossTerm("joints_loss", "mse", (_span(0, action_dim),)),))
    if mode not in ACTION_LAYOUTS:
        raise ValueError(f"model.action_mode: unknown action space {mode!r} (choose from "
                         f"{', '.join([*ACTION_LAYOUTS, 'auto'])})")
    return ACTION_LAYOUTS[mode]


def layout_problems(mode: str, *, action_dim: int | None, max_action_dim: int, state_width: int,
                    normalization: str) -> list[str]:
    """Messages for datasets and settings the action space cannot train on (empty when fine).

    Args:
        state_width: the width of the state after padding (model.max_state_dim, 0 without proprio).
        normalization: data.normalization (BCE gripper targets must stay 0/1).
    """
    try:
        layout = layout_for(mode, action_dim=action_dim, max_action_dim=max_action_dim)
    except ValueError as exc:
        return [str(exc)]
    problems = []
    if action_dim is not None:
        if layout.fixed_real_dim and mode != "auto" and action_dim != layout.real_dim:
            problems.append(f"model.action_mode={mode} trains and returns {layout.real_dim} action channels but "
                            f"data.action_dim is {action_dim}; use model.action_mode=auto for another width")
        elif action_dim > layout.dim_action:
            what = "model.max_action_dim" if mode == "auto" else f"the {mode} space's width"
            problems.append(f"data.action_dim {action_dim} exceeds {what} {layout.dim_action}; "
                            + ("raise model.max_action_dim (a new action layer, not loadable from a 20-wide "
                               "checkpoint)" if mode == "auto" else "use model.action_mode=auto"))
    if state_width and layout.zeroed and max(layout.zeroed) >= state_width:
        problems.append(f"model.action_mode={mode} zeroes state channels {list(layout.zeroed)} but the state is "
                        f"{state_width} wide (model.max_state_dim); raise model.max_state_dim to at least "
                        f"{max(layout.zeroed) + 1}")
    if layout.bce_channels() and normalization != "none":
        problems.append(f"model.action_mode={mode} trains gripper channels {list(layout.bce_channels())} with BCE "
                        f"on 0/1 targets, which data.normalization={normalization} would move; set "
                        "data.normalization=none (X-VLA's default) or model.action_mode=agibot_ee6d / auto")
    return problems
