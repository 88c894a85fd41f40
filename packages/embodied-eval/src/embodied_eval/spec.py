"""Entry-point specs of embodied-eval: the ``serve`` and ``eval`` commands and the env plugins (imports no torch,
no simulator)."""

from __future__ import annotations

from embodied_core.registry.specs import PluginSpec
from embodied_eval.envs.metaworld.options import MetaworldOptions

__all__ = ["ALOHA_INSERTION", "ALOHA_TRANSFER_CUBE", "COLLECT_COMMAND", "EVAL_COMMAND", "METAWORLD", "PUSHT",
           "SERVE_COMMAND", "SYNTH_REACH"]

SERVE_COMMAND = PluginSpec(name="serve", description="serve a checkpoint over openpi's websocket protocol",
                           factory="embodied_eval.cli.serve:main")
EVAL_COMMAND = PluginSpec(name="eval", description="closed-loop rollouts in a simulator, or open-loop on a dataset",
                          factory="embodied_eval.cli.eval:main")
COLLECT_COMMAND = PluginSpec(name="data-collect",
                             description="record an env plugin's scripted expert as a LeRobot v3.0 dataset "
                                         "(`embodied data collect`)",
                             factory="embodied_eval.cli.collect:main")

SYNTH_REACH = PluginSpec(name="synth_reach",
                         description="the point-arm reaching task of `embodied data synth` (no extra dependency)",
                         factory="embodied_eval.envs.synth_reach:make_env")
PUSHT = PluginSpec(name="pusht", description="gym-pusht PushT (2-D pushing, pymunk)",
                   factory="embodied_eval.envs.pusht:make_env", requires=("gym_pusht",),
                   install_hint="pip install 'embodied-eval[pusht]'")
ALOHA_INSERTION = PluginSpec(name="aloha_insertion", description="gym-aloha peg insertion (bimanual, MuJoCo)",
                             factory="embodied_eval.envs.aloha:make_insertion", requires=("gym_aloha",),
                             install_hint="pip install 'embodied-eval[aloha]' (rendering: MUJOCO_GL=egl or osmesa)")
ALOHA_TRANSFER_CUBE = PluginSpec(name="aloha_transfer_cube",
                                 description="gym-aloha cube transfer between arms (bimanual, MuJoCo)",
                                 factory="embodied_eval.envs.aloha:make_transfer_cube", requires=("gym_aloha",),
                                 install_hint="pip install 'embodied-eval[aloha]' (rendering: MUJOCO_GL=egl or "
                                              "osmesa)")
METAWORLD = PluginSpec(name="metaworld",
                       description="MetaWorld v3 tasks (Sawyer arm, MuJoCo) with lerobot 0.6.1's env conventions; "
                                   "--task or --suite, scripted experts",
                       factory="embodied_eval.envs.metaworld.plugin:make_env", requires=("metaworld", "mujoco"),
                       install_hint="pip install 'embodied-eval[metaworld]' (rendering: MUJOCO_GL=egl or osmesa)",
                       options=MetaworldOptions)
