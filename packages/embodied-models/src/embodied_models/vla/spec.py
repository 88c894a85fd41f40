"""The entry-point spec every VLA port declares (no torch: loading a spec must stay light)."""

from __future__ import annotations

from embodied_core.registry.specs import ModelSpec

__all__ = ["TRANSFORMERS_HINT", "vla_model_spec"]

TRANSFORMERS_HINT = "pip install 'transformers>=5.24,<5.25'"
"""What installs the transformers version the ports are tested with (embodied-models' pyproject pins it)."""


def vla_model_spec(package: str, name: str, description: str, *, model_config: type, data_config: type,
                   requires: tuple[str, ...] = ("transformers",), install_hint: str = TRANSFORMERS_HINT) -> ModelSpec:
    """A VLA port's ModelSpec, laid out as every port is: ``<package>.modeling:build_model``,
    ``<package>.transforms:make_transforms``, ``<package>.checks:check_run_config`` (rules spanning the model,
    data and training sections), the default YAML ``<package>:<name>.yaml``, the ``--tokenizer-path`` flag, and a
    task string in every observation.

    Args:
        package: the port's import path (``"embodied_models.pi05"``).
        name: the plugin name; also the stem of its default YAML.
        description: the line ``embodied plugins`` shows.
        model_config, data_config: the port's attrs config classes.
        requires, install_hint: the optional distributions it imports and how to install them.
    """
    return ModelSpec(name=name, description=description, factory=f"{package}.modeling:build_model",
                     model_config=model_config, data_config=data_config, default_yaml=f"{package}:{name}.yaml",
                     transforms=f"{package}.transforms:make_transforms", requires=requires, install_hint=install_hint,
                     uses_flags=("tokenizer_path",), checks=(f"{package}.checks:check_run_config",), needs_task=True)
