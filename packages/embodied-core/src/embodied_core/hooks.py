"""Lifecycle hooks (pluggy).

Hook implementations come from the ``embodied.hooks`` entry-point group (an entry point may name a module,
``my_pkg.hooks``, or an object, ``my_pkg.hooks:PLUGIN``) and from objects passed to ``Trainer(..., plugins=[...])``.
Any of them can be blocked by name (``--block-plugins NAME``), like pytest's ``-p no:NAME``. Installed hook
plugins are imported when a run is validated, so one that fails to import stops the run before the model is
built, with a message naming it and the flag that blocks it. Hooks receive narrow keyword arguments, never
the trainer itself.

Example::

    from embodied_core import hookimpl

    class PrintLoss:
        @hookimpl
        def on_step_end(self, step, metrics):
            print(step, metrics["loss"])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pluggy

from embodied_core import registry
from embodied_core.registry.groups import HOOKS

__all__ = ["PROJECT", "HookSpecs", "hookimpl", "hookspec", "make_plugin_manager", "plugin_name"]

PROJECT = "embodied"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class HookSpecs:
    """The lifecycle hooks a plugin may implement (all optional, all keyword arguments)."""

    @hookspec
    def on_train_start(self, config: Any, model: Any, output_dir: str, start_step: int) -> None:
        """After setup (model built, state restored), before the first step."""

    @hookspec
    def on_step_end(self, step: int, metrics: dict[str, float] | None) -> None:
        """After every optimizer update; ``metrics`` is set on logging steps only (None otherwise)."""

    @hookspec
    def on_save_checkpoint(self, step: int, path: str) -> None:
        """After a checkpoint was completely written to ``path``."""

    @hookspec
    def on_load_checkpoint(self, step: int, path: str) -> None:
        """After the training state was restored from ``path``."""

    @hookspec
    def on_train_end(self, step: int, output_dir: str, summary: dict[str, Any]) -> None:
        """After the last step and the final checkpoint, before loggers close."""


def plugin_name(plugin: Any) -> str:
    """The name an in-process hook plugin is registered (and blocked) under: its ``__name__`` (a module or
    class), else its class name."""
    return getattr(plugin, "__name__", None) or type(plugin).__name__


def make_plugin_manager(plugins: Iterable[Any] = (), *, blocked: Iterable[str] = ()) -> pluggy.PluginManager:
    """A plugin manager with the hooks of installed ``embodied.hooks`` entry points and ``plugins``.

    Args:
        plugins: hook implementation objects (modules, classes or instances) registered in-process.
        blocked: names (entry-point names, or the class/module names of ``plugins``) not to register.
    """
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(HookSpecs)
    for name in blocked:
        manager.set_blocked(name)
    for name in registry.names(HOOKS):
        if manager.is_blocked(name):
            continue
        manager.register(registry.load_object(registry.get_entry(HOOKS, name)), name=name)
    for plugin in plugins:
        name = plugin_name(plugin)
        if not manager.is_blocked(name):
            manager.register(plugin, name=name)
    return manager
