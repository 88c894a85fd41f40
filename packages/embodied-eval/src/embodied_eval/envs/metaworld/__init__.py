"""The ``metaworld`` env plugin: MetaWorld v3 tasks with lerobot 0.6.1's ``MetaworldEnv`` conventions.

- :mod:`.tasks`: lerobot's task tables (difficulty groups, instructions, expert classes) and ``--suite``;
- :mod:`.options`: the plugin's options (``--task``, ``--suite``, ``--render``, ``--image-size``);
- :mod:`.gym_env`: one task as a gymnasium env, exactly as lerobot's;
- :mod:`.plugin`: the :class:`~embodied_eval.envs.base.EvalEnv` ``embodied eval`` and ``embodied data collect`` use.

Importing this package imports no simulator.
"""
