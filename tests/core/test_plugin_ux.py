"""Plugin UX as a third-party author meets it: declared checks and options, loggers and hooks that are
selectable, blockable and fail at validation, `embodied plugins --check`, the module:attr syntax, flag help.

Plugins are real modules written to a folder on sys.path and registered through ``EMBODIED_PLUGINS`` or
``register()``; options and the declared check of a real third-party package come from examples/plugin-template.
"""

from __future__ import annotations

import ast
import csv
import itertools
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from embodied_core import registry
from embodied_core.cli.train import parse_train_argv
from embodied_core.config.resolve import load_config
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError, UsageError
from embodied_core.hooks import make_plugin_manager
from embodied_core.registry import ObjectPath, PluginSpec, groups
from embodied_core.registry._first_party import FIRST_PARTY
from embodied_core.validation import validate_run_config
from tests.support import REPO_ROOT, clean_env, run_embodied

_TINY = {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", "num_workers": 0, "num_samples": 16,
         "dtype": "float32", "save_interval": 0}

_MODULES = {
    # a logger whose factory module is broken (the spec itself loads)
    "uxplug_sink": """
        from embodied_core.registry import PluginSpec
        SPEC = PluginSpec(name="bad_sink", factory="uxplug_sink_impl:build")
    """,
    "uxplug_sink_impl": "import uxplug_this_dependency_is_not_installed\n",
    # a module-valued hook plugin that fails to import
    "uxplug_bad_hooks": "raise RuntimeError('hook module broken on import')\n",
    # a module-valued hook plugin that works
    "uxplug_hooks": """
        from embodied_core import hookimpl
        STEPS = []
        @hookimpl
        def on_step_end(step, metrics):
            STEPS.append(step)
    """,
    # a model and an optimizer whose factories cannot be imported
    "uxplug_model": """
        from embodied_core.registry import ModelSpec
        from embodied_plugin_template.config import TinyFlowDataConfig, TinyFlowPolicyConfig
        SPEC = ModelSpec(name="broken_model", factory="uxplug_missing_module:build_model",
                         model_config=TinyFlowPolicyConfig, data_config=TinyFlowDataConfig)
    """,
    "uxplug_optim": """
        from embodied_core.registry import PluginSpec
        SPEC = PluginSpec(name="broken_opt", factory="uxplug_missing_module:build")
        CHECKED = PluginSpec(name="checked_opt", factory="uxplug_optim:build", checks=("uxplug_optim:check",))
        def build(groups, args):
            import torch
            return torch.optim.SGD(groups, lr=args.lr_base)
        def check(config):
            if config.training.weight_decay > 0:
                return [f"--optimizer checked_opt: ignores --weight-decay {config.training.weight_decay}; set it to 0"]
            return []
    """,
}


@pytest.fixture
def plugins_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The modules above in a folder on sys.path (and PYTHONPATH, for CLI subprocesses)."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    for name, source in _MODULES.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(folder))
    registry.clear_cache()
    yield folder
    registry.clear_cache()
    for name in [m for m in sys.modules if m.startswith("uxplug")]:
        del sys.modules[name]


def _cli_env(folder: Path, plugins: str) -> dict[str, str]:
    return clean_env(PYTHONPATH=str(folder), EMBODIED_PLUGINS=plugins)


def test_one_module_attr_syntax() -> None:
    assert ObjectPath.parse("pkg.mod:obj.attr") == ObjectPath("pkg.mod", "obj.attr")
    assert ObjectPath.parse("pkg.mod", allow_module=True) == ObjectPath("pkg.mod", "")
    for bad in ("pkg.mod", "pkg.mod:", ":attr", "pkg..mod:x", "pkg.mod:x.", "pkg mod:x"):
        with pytest.raises(ValueError, match=r"expected 'package.module:attr'"):
            ObjectPath.parse(bad)
    with pytest.raises(ValueError, match=r"PluginSpec.factory: expected"):
        PluginSpec(name="x", factory="no_attribute")
    with pytest.raises(ValueError, match=r"PluginSpec.checks is a tuple"):
        PluginSpec(name="x", factory="m:f", checks="m:check")  # type: ignore[arg-type]


def test_module_valued_hook_in_env_var_without_colon(plugins_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(registry.PLUGINS_ENV_VAR, "hooks:ux_hooks=uxplug_hooks")
    manager = make_plugin_manager()
    manager.hook.on_step_end(step=7, metrics=None)
    assert sys.modules["uxplug_hooks"].STEPS == [7]
    monkeypatch.setenv(registry.PLUGINS_ENV_VAR, "optimizers:ux=uxplug_optim")  # a spec must name an attribute
    with pytest.raises(UsageError, match=r"module-valued hook plugin: 'hooks:my_hooks=my_pkg.hooks'"):
        registry.names(groups.OPTIMIZERS)


def test_config_does_not_import_trainer_or_distributed() -> None:
    code = ("import sys, embodied_core.config.validate, embodied_core.config.resolve; "
            "print(sorted(m for m in sys.modules if m.startswith(('embodied_core.distributed', "
            "'embodied_core.trainer'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=clean_env())
    assert out.stdout.strip() == "[]"


def test_declared_checks_run_for_the_selected_plugin(plugins_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(registry.PLUGINS_ENV_VAR, "optimizers:checked_opt=uxplug_optim:CHECKED")
    config = load_config(training={**_TINY, "optimizer": "checked_opt", "weight_decay": 0.1})
    with pytest.raises(ConfigError, match=r"--optimizer checked_opt: ignores --weight-decay 0.1"):
        validate_run_config(config, world_size=1)
    validate_run_config(load_config(training={**_TINY, "optimizer": "checked_opt", "weight_decay": 0.0}),
                        world_size=1)
    validate_run_config(load_config(training={**_TINY, "weight_decay": 0.1}), world_size=1)  # AdamW: no such rule


def test_broken_logger_and_hook_fail_at_validation_named_with_the_blocking_flag(
        plugins_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(registry.PLUGINS_ENV_VAR, "loggers:bad_sink=uxplug_sink:SPEC,hooks:bad_hooks=uxplug_bad_hooks")
    config = load_config(training=_TINY)
    with pytest.raises(ConfigError) as info:
        validate_run_config(config, world_size=1)
    problems = info.value.problems
    sink = next(p for p in problems if "'bad_sink'" in p)
    assert "uxplug_this_dependency_is_not_installed" in sink and "--block-plugins bad_sink" in sink
    assert "uxplug_sink_impl:build" in sink and "leave it out of --loggers" in sink
    hook = next(p for p in problems if "'bad_hooks'" in p)
    assert "hook module broken on import" in hook and "--block-plugins bad_hooks" in hook
    blocked = load_config(training={**_TINY, "block_plugins": ["bad_sink", "bad_hooks"]})
    validate_run_config(blocked, world_size=1)
    chosen = load_config(training={**_TINY, "loggers": ["console", "jsonl"], "block_plugins": ["bad_hooks"]})
    validate_run_config(chosen, world_size=1)


def test_unknown_logger_or_blocked_name_is_an_error() -> None:
    config = load_config(training={**_TINY, "loggers": ["jsonl", "jsnol"], "block_plugins": ["run_evnts"]})
    with pytest.raises(ConfigError) as info:
        validate_run_config(config, world_size=1)
    text = str(info.value)
    assert "unknown --loggers 'jsnol'" in text and "did you mean 'jsonl'" in text
    assert "--block-plugins run_evnts: no installed logger or hook" in text and "did you mean 'run_events'" in text


def test_loggers_flag_selects_and_block_plugins_removes(tmp_path: Path) -> None:
    from embodied_core.loggers.console import ConsoleLogger
    from embodied_core.loggers.jsonl import JsonlLogger
    from embodied_core.trainer.components import build_loggers

    def built(**training: object) -> list[type]:
        args = load_config(training={**_TINY, **training}).training
        sinks = build_loggers(args, output_dir=tmp_path, is_main=True, resume_step=None)
        for sink in sinks:
            sink.close()
        return [type(sink) for sink in sinks]

    assert built(loggers=["jsonl"]) == [JsonlLogger]
    assert ConsoleLogger in built() and JsonlLogger in built()  # unset: every installed logger is asked
    assert JsonlLogger not in built(block_plugins=["jsonl"])


def test_broken_model_and_broken_optimizer_exit_with_the_same_code(plugins_dir: Path, tmp_path: Path) -> None:
    env = _cli_env(plugins_dir, "models:broken_model=uxplug_model:SPEC,optimizers:broken_opt=uxplug_optim:SPEC,"
                                "loggers:bad_sink=uxplug_sink:SPEC")
    args = ["--dataset-format", "dummy_datasets", "--dtype", "float32", "--num-workers", "0"]
    model = run_embodied("train", "--model-name", "broken_model", *args, "--block-plugins", "bad_sink", env=env,
                         timeout=120)
    optimizer = run_embodied("train", "--model-name", "tiny_flow_policy", "--optimizer", "broken_opt", *args,
                             "--block-plugins", "bad_sink", env=env, timeout=120)
    logger = run_embodied("train", "--model-name", "tiny_flow_policy", *args, "--output-dir", str(tmp_path / "out"),
                          env=env, timeout=120)
    for result, name in ((model, "broken_model"), (optimizer, "broken_opt"), (logger, "bad_sink")):
        assert result.returncode == 2, result.stderr
        assert f"plugin {name!r}" in result.stderr and "Traceback" not in result.stderr
    assert "uxplug_missing_module" in model.stderr and "select another --model-name" in model.stderr
    assert not (tmp_path / "out").exists()  # the broken logger stopped the run before anything was built


def test_plugins_check_marks_entries_that_fail_to_load(plugins_dir: Path) -> None:
    env = _cli_env(plugins_dir, "optimizers:broken_opt=uxplug_optim:SPEC,hooks:bad_hooks=uxplug_bad_hooks")
    listing = run_embodied("plugins", "--group", "optimizers", env=env, timeout=60)
    assert listing.returncode == 0 and "uxplug_optim:SPEC" in listing.stdout and "FAILED" not in listing.stdout
    checked = run_embodied("plugins", "--group", "optimizers", "--check", env=env, timeout=120)
    assert checked.returncode == 1
    rows = {line.split()[1]: line for line in checked.stdout.splitlines()[1:]}
    assert "FAILED: ModuleNotFoundError" in rows["broken_opt"] and "uxplug_missing_module" in rows["broken_opt"]
    assert rows["AdamW"].rstrip().endswith("ok") and "missing: transformer_engine" in rows["TEFusedAdamW"]
    hooks = run_embodied("plugins", "--group", "hooks", "--check", env=env, timeout=60)
    assert "FAILED: RuntimeError: hook module broken on import" in hooks.stdout


def test_first_party_hint_table_matches_the_entry_points() -> None:
    from importlib import metadata

    for dist, provided in FIRST_PARTY.items():
        declared = {(ep.group, ep.name) for ep in metadata.distribution(dist).entry_points
                    if ep.group != groups.HOOKS}
        listed = {(group, name) for group, names in provided.items() for name in names}
        assert listed - declared == set(), f"{dist} does not register {sorted(listed - declared)}"
        assert declared - listed == set(), f"the table misses what {dist} registers: {sorted(declared - listed)}"


def test_missing_first_party_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from embodied_core.registry import _first_party

    monkeypatch.setattr(_first_party, "_installed", lambda dist: dist != "embodied-dist")
    hint = registry.install_hint(groups.DISTRIBUTED_STRATEGIES, "fsdp")
    assert hint.startswith("'fsdp' is provided by the package embodied-dist, which is not installed")
    assert "pip install --find-links wheelhouse embodied-dist" in hint
    assert registry.install_hint(groups.DISTRIBUTED_STRATEGIES, "fdsp") == \
        "more distributed_strategies come with embodied-dist (not installed)"
    assert registry.install_hint(groups.MODELS, "pi05_tiny") == ""  # installed: a typo is answered by the listing


# ---------------------------------------------------------------- options (examples/plugin-template)
_WSD = ["--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets", "--lr-decay-style",
        "warmup_stable_decay"]


def test_plugin_options_from_flags_dotlist_and_yaml(tmp_path: Path) -> None:
    config = parse_train_argv([*_WSD, "--plugins.warmup-stable-decay.decay-fraction", "0.5",
                               "plugins.csv_metrics.filename=m.csv", "plugins.csv_metrics.metrics=[loss,lr]"],
                              environ={})
    assert config.plugins["warmup_stable_decay"].decay_fraction == 0.5
    assert config.plugins["warmup_stable_decay"].decay_shape == "linear"  # the option's default
    assert (config.plugins["csv_metrics"].filename, config.plugins["csv_metrics"].metrics) == ("m.csv", ["loss", "lr"])
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"training": {"lr_decay_style": "warmup_stable_decay"},
                                    "plugins": {"warmup_stable_decay": {"decay_shape": "cosine"}}}))
    from_yaml = load_config("tiny_flow_policy", config_file=str(path))
    assert from_yaml.plugins["warmup_stable_decay"].decay_shape == "cosine"


def test_option_and_field_problems_are_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        parse_train_argv([*_WSD, "plugins.warmup_stable_decay.decay_fraction=2", "plugins.warmup_stable_decay.shape=x",
                          "plugins.csv_metrics.filename=a/b.csv", "model.hidden_dim=4", "training.seed=abc",
                          "plugins.lion.beta=1"], environ={})
    problems = info.value.problems
    expected = ("plugins.warmup_stable_decay.decay_fraction: must be in (0, 1] (got 2.0)",
                "plugins.warmup_stable_decay.shape: unknown key (did you mean 'decay_shape'?)",
                "plugins.csv_metrics.filename: must be a plain file name",
                "model.hidden_dim: must be >= 8 (got 4)",  # the model's validate() rule, with the field errors
                "training.seed: expected an integer, got 'abc'",
                "plugins.lion: no selected plugin with options has this name")
    for text in expected:
        assert any(p.startswith(text) for p in problems), (text, problems)
    assert "RawStr" not in str(info.value)


def test_declared_check_of_a_third_party_schedule() -> None:
    config = load_config(training={**_TINY, "lr_decay_style": "warmup_stable_decay", "train_iters": 100,
                                   "lr_warmup_iters": 90}, overrides=["plugins.warmup_stable_decay.decay_fraction=0.2"])
    with pytest.raises(ConfigError, match=r"--lr-warmup-iters 90 overlaps the final decay \(the last 20 of 100"):
        validate_run_config(config, world_size=1)


def test_options_on_a_kind_built_without_them_are_rejected(plugins_dir: Path) -> None:
    from embodied_plugin_template.schedules import WarmupStableDecayOptions

    from embodied_core.registry import DatasetFormatSpec

    spec = DatasetFormatSpec(name="ux_format", factory="uxplug_optim:build", needs_path=False,
                             options=WarmupStableDecayOptions)
    registry.register(groups.DATASET_FORMATS, "ux_format", spec)
    try:
        with pytest.raises(ConfigError, match=r"--dataset-format ux_format: declares options, but "
                                              r"embodied.dataset_formats plugins are built without them"):
            load_config(training={**_TINY, "dataset_format": "ux_format"})
    finally:
        registry.unregister(groups.DATASET_FORMATS, "ux_format")


def test_plugin_options_are_shown_in_help() -> None:
    result = run_embodied("train", "--lr-decay-style", "warmup_stable_decay", "--help", timeout=60)
    assert result.returncode == 0
    assert "--plugins.warmup-stable-decay.decay-fraction" in result.stdout
    assert "Share of the decay length" in result.stdout  # the option's docstring
    model_help = run_embodied("train", "--model-name", "tiny_flow_policy", "--help", timeout=60).stdout
    assert "--plugins.csv-metrics.filename" in model_help  # an installed logger's options


def test_options_reach_the_factories_and_config_yaml_records_every_plugin(tmp_path: Path) -> None:
    from embodied_core import Trainer

    out = tmp_path / "run"
    training = {**_TINY, "train_iters": 10, "lr_warmup_iters": 2, "lr_base": 1e-3, "min_lr": 0.0,
                "lr_decay_style": "warmup_stable_decay", "output_dir": str(out)}
    config = load_config(training=training, overrides=["plugins.warmup_stable_decay.decay_fraction=0.5",
                                                       "plugins.csv_metrics.filename=m.csv"])
    Trainer(config).train()
    lrs = [json.loads(line)["lr"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert lrs[:5] == pytest.approx([5e-4, 1e-3, 1e-3, 1e-3, 1e-3])  # warmup 2, plateau to step 5
    assert lrs[5:] == pytest.approx([1e-3, 8e-4, 6e-4, 4e-4, 2e-4])  # linear decay over the last half
    with (out / "m.csv").open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["step", "metric", "value"]
    assert float(next(r[2] for r in rows if r[:2] == ["10", "lr"])) == pytest.approx(2e-4)  # the csv logger ran
    doc = yaml.safe_load((out / "config.yaml").read_text())
    versions = doc["embodied"]["plugins"]
    for key in ("embodied.distributed_strategies/single", "embodied.loggers/jsonl", "embodied.loggers/csv_metrics",
                "embodied.hooks/run_events", "embodied.lr_schedulers/warmup_stable_decay"):
        assert key in versions, sorted(versions)
    assert versions["embodied.lr_schedulers/warmup_stable_decay"].startswith("embodied-plugin-template ")
    assert doc["plugins"]["warmup_stable_decay"] == {"decay_fraction": 0.5, "decay_shape": "linear"}
    again = load_config(config_file=str(out / "config.yaml"))
    assert again.plugins == config.plugins  # --config-file config.yaml reproduces the options


def test_every_train_flag_has_real_help() -> None:
    """Each flag's docstring (its --help text) says what it does, its unit and when to change it: > 3 words."""
    source = (REPO_ROOT / "packages/embodied-core/src/embodied_core/config/training_args.py").read_text()
    body = next(node for node in ast.parse(source).body
                if isinstance(node, ast.ClassDef) and node.name == "TrainingArgs").body
    helps: dict[str, str] = {}
    for field, doc in itertools.pairwise(body):
        if isinstance(field, ast.AnnAssign) and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
            helps[field.target.id] = str(doc.value.value)  # type: ignore[attr-defined]
    import attrs

    fields = [f.name for f in attrs.fields(TrainingArgs)]
    assert sorted(helps) == sorted(fields), "every flag needs a docstring under its field"
    terse = {name: text for name, text in helps.items() if len(text.split()) <= 3}
    assert not terse, f"flags whose --help is 3 words or fewer: {terse}"
