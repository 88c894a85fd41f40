"""Config edge cases of the real ``embodied`` CLI: bool flags given a non-boolean, a missing tokenizer
directory (reported before the model is built), and a reader that closes the pipe (``| head``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from embodied_core.cli._argv import value_kinds
from embodied_core.cli.train import parse_train_argv
from embodied_core.config.paths import tokenizer_path_problem
from embodied_core.config.training_args import TrainingArgs
from embodied_core.errors import ConfigError
from tests.support import DATASETS_DIR, clean_env, run_embodied

BASE = ["--model-name", "tiny_flow_policy", "--dataset-format", "dummy_datasets"]
BOOL_FLAGS = sorted(flag for flag, kind in value_kinds(TrainingArgs).items() if kind == "bool")


@pytest.mark.parametrize("spelling", ["{flag}=maybe", "{flag} maybe"])
def test_every_bool_flag_given_a_non_boolean_names_the_flag_and_the_valid_values(spelling: str) -> None:
    assert "--resume" in BOOL_FLAGS and len(BOOL_FLAGS) > 10
    for flag in BOOL_FLAGS:
        with pytest.raises(ConfigError) as caught:
            parse_train_argv([*BASE, *spelling.format(flag=flag).split()], environ={})
        negative = "--no-" + flag[2:]
        assert caught.value.problems == [f"{flag} 'maybe': not a boolean; write {flag} or {negative}, or "
                                         f"{flag}=VALUE with VALUE one of true, false, yes, no, on, off, 1, 0"]


def test_bool_flag_problems_are_reported_together_and_negatives_take_no_value() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_train_argv([*BASE, "--resume=maybe", "--no-streaming=true", "--manual-gc=2"], environ={})
    assert len(caught.value.problems) == 3
    assert "--no-streaming takes no value (got 'true'); write --no-streaming, or --streaming=false" \
        in caught.value.problems
    parsed = parse_train_argv([*BASE, "--resume=YES", "--streaming", "off"], environ={})  # valid spellings still work
    assert parsed.training.resume is True and parsed.training.streaming is False


def test_bool_flag_error_exits_2_from_the_cli(tmp_path: Path) -> None:
    result = run_embodied("train", *BASE, "--resume=maybe", "--output-dir", str(tmp_path / "out"), timeout=60)
    assert result.returncode == 2, result.stderr
    assert "--resume 'maybe': not a boolean" in result.stderr
    assert "Unrecognized options" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.timeout(180)
def test_missing_tokenizer_directory_is_reported_before_the_model_is_built(tmp_path: Path) -> None:
    missing = tmp_path / "paligemma_tokenizer"
    result = run_embodied("train", "--model-name", "pi05_tiny", "--dataset-format", "dummy_datasets",
                          "--tokenizer-path", str(missing), "--output-dir", str(tmp_path / "out"), "--train-iters", "1",
                          timeout=170)
    assert result.returncode == 2, result.stderr
    assert f"--tokenizer-path {missing}: no such directory" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()  # validation failed: no model, no config.yaml


def test_tokenizer_path_rules(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    assert tokenizer_path_problem(str(tmp_path)) is None
    assert "is a file, not a tokenizer directory" in tokenizer_path_problem(str(tmp_path / "tokenizer.json"))
    assert "no such directory" in tokenizer_path_problem("./missing/tokenizer")


_CLOSED_PIPE = """
import os, subprocess, sys
read_end, write_end = os.pipe()
os.close(read_end)  # the reader is gone before the first byte, like `| head` after its line
result = subprocess.run([sys.executable, "-m", "embodied_core.cli.main", *sys.argv[1:]], stdout=write_end,
                        stderr=subprocess.PIPE, text=True)
print(result.returncode)
print(result.stderr)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("argv", [["train", "--help"], ["train", *BASE, "--help"], ["plugins"], ["--help"],
                                  ["data", "--help"],
                                  ["data", "inspect", str(DATASETS_DIR / "lerobot_written" / "v30")]],
                         ids=["train-help", "model-help", "plugins", "help", "data-help", "data-inspect"])
def test_a_closed_pipe_ends_every_command_quietly(argv: list[str]) -> None:
    result = subprocess.run([sys.executable, "-c", _CLOSED_PIPE, *argv], capture_output=True, text=True,
                            env=clean_env(), timeout=110, cwd=os.getcwd())
    code, _, stderr = result.stdout.partition("\n")
    assert int(code) in (0, 141), stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
