"""Freezes the flag contract: every flag of ../shared/FLAGS.md and ../shared/FLAGS_EXTENDED.md exists in
``embodied train`` with its default (as its own option, or as an exact alias of one), and no flag is dead."""

from __future__ import annotations

import re

import attrs
import pytest

from embodied_core.cli.train import parse_train_argv
from embodied_core.config.aliases import field_aliases
from embodied_core.config.resolve import load_config
from embodied_core.config.training_args import TrainingArgs
from tests.support import REPO_ROOT, SHARED_DIR, run_embodied

_ROW = re.compile(r"^\|\s*`--([a-z0-9-]+)`\s*\|\s*([^|]*?)\s*\|")
CONTRACT_FILES = ("FLAGS.md", "FLAGS_EXTENDED.md")


def _contract(name: str) -> dict[str, str]:
    rows = {}
    for line in (SHARED_DIR / name).read_text().splitlines():
        match = _ROW.match(line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def _all_rows() -> list[tuple[str, str, str]]:
    return [(name, flag, default) for name in CONTRACT_FILES for flag, default in sorted(_contract(name).items())]


def _parse_default(text: str) -> object:
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    if text.startswith("[") and text.endswith("]"):
        return [int(item) for item in text[1:-1].split(",") if item.strip()]
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text  # a literal value such as `none`


def _field(flag: str) -> str:
    """The TrainingArgs field a flag sets (an alias names its canonical field)."""
    name = flag.replace("-", "_")
    return field_aliases().get(name, name)


def _defaults() -> dict[str, object]:
    out = {}
    for field in attrs.fields(TrainingArgs):
        default = field.default
        out[field.name] = default.factory() if isinstance(default, attrs.Factory) else default
    return out


def test_contract_files_are_parsed() -> None:
    assert len(_contract("FLAGS.md")) >= 70  # the tables were read, not silently skipped
    assert len(_contract("FLAGS_EXTENDED.md")) >= 40


def test_no_flag_is_in_both_files() -> None:
    assert not set(_contract("FLAGS.md")) & set(_contract("FLAGS_EXTENDED.md"))


@pytest.mark.parametrize(("source", "flag", "default"), _all_rows(), ids=[f"{s}:{f}" for s, f, _ in _all_rows()])
def test_flag_exists_with_contract_default(source: str, flag: str, default: str) -> None:
    defaults = _defaults()
    field = _field(flag)
    assert field in defaults, f"--{flag} of {source} is missing from TrainingArgs (no field, no alias)"
    expected = _parse_default(default)
    assert defaults[field] == expected, f"--{flag} ({source}): default {defaults[field]!r}, contract says {expected!r}"


def test_help_names_every_alias() -> None:
    result = run_embodied("train", "--help", timeout=120)
    assert result.returncode == 0, result.stderr
    text = " ".join(re.sub(r"[\u2500-\u257f]", " ", result.stdout).split())  # without the box-drawing frame
    for alias, canonical in field_aliases().items():
        assert f"--{alias.replace('_', '-')} is an alias" in text, (alias, canonical)


@pytest.mark.parametrize(("alias", "value"), [("polynomial-power", "2.5"), ("num-cycles", "1.5")])
def test_alias_and_canonical_give_the_same_config(alias: str, value: str) -> None:
    canonical = "--" + _field(alias).replace("_", "-")
    base = ["--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets"]
    via_alias = parse_train_argv([*base, f"--{alias}", value], environ={})
    via_canonical = parse_train_argv([*base, canonical, value], environ={})
    via_equals = parse_train_argv([*base, f"--{alias}={value}"], environ={})
    assert via_alias.training == via_canonical.training == via_equals.training
    assert getattr(via_alias.training, _field(alias)) == float(value)
    env = {f"EMBODIED_{alias.upper().replace('-', '_')}": value}
    assert getattr(parse_train_argv(base, environ=env).training, _field(alias)) == float(value)
    dotlist = load_config("tiny_flow_policy", overrides=[f"training.{alias.replace('-', '_')}={value}"], environ={})
    assert getattr(dotlist.training, _field(alias)) == float(value)


def test_alias_and_canonical_with_different_values_in_one_layer_is_an_error() -> None:
    from embodied_core.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape("--polynomial-power 2.0 and --lr-decay-power 3.0")):
        load_config("tiny_flow_policy", training={"polynomial_power": 2.0, "lr_decay_power": 3.0}, environ={})


def test_no_flag_is_dead() -> None:
    """Every TrainingArgs field is read somewhere in the packages' code (outside its own declaration)."""
    sources = [p for p in (REPO_ROOT / "packages").glob("*/src/**/*.py") if p.name != "training_args.py"]
    text = "\n".join(p.read_text() for p in sources)
    dead = [f.name for f in attrs.fields(TrainingArgs)
            if not re.search(rf"\.{f.name}\b|[\"']{f.name}[\"']", text)]
    assert not dead, f"flags no code reads: {dead}"
