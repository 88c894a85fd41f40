"""Freezes the flag contract: every flag of ../shared/FLAGS.md exists in ``embodied train`` with its default."""

from __future__ import annotations

import re

import attrs
import pytest

from embodied_core.config.training_args import TrainingArgs
from tests.support import SHARED_DIR

_ROW = re.compile(r"^\|\s*`--([a-z0-9-]+)`\s*\|\s*([^|]*?)\s*\|")


def _contract() -> dict[str, str]:
    rows = {}
    for line in (SHARED_DIR / "FLAGS.md").read_text().splitlines():
        match = _ROW.match(line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def _parse_default(text: str) -> object:
    if text in ("None",):
        return None
    if text in ("True", "False"):
        return text == "True"
    if text == '""':
        return ""
    if text == "[-1]":
        return [-1]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _defaults() -> dict[str, object]:
    out = {}
    for field in attrs.fields(TrainingArgs):
        default = field.default
        out[field.name.replace("_", "-")] = default.factory() if isinstance(default, attrs.Factory) else default
    return out


def test_flags_md_is_parsed() -> None:
    assert len(_contract()) >= 70  # the tables were read, not silently skipped


@pytest.mark.parametrize("flag", sorted(_contract()))
def test_flag_exists_with_contract_default(flag: str) -> None:
    defaults = _defaults()
    assert flag in defaults, f"--{flag} of FLAGS.md is missing from TrainingArgs"
    expected = _parse_default(_contract()[flag])
    if flag == "zero-master-param-dtype":
        expected = "none"  # FLAGS.md writes the literal value `none`
    assert defaults[flag] == expected, f"--{flag}: default {defaults[flag]!r}, contract says {expected!r}"
